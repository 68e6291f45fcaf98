# pass@k, the unbiased estimator of Chen et al. (2021): of n samples of a
# prompt, c are correct; the chance that at least one of k samples drawn
# without replacement from the n is correct is 1 - C(n-c, k) / C(n, k).
# Written as a product so nothing overflows:
#   C(n-c, k) / C(n, k) = prod over i = n-c+1 .. n of (1 - k / i).
# n - c < k: every draw of k holds a correct one, 1. k > n: undefined, null.
# Bad arguments (not integers, c outside 0..n, k < 1) are an error.
def pass_at_k($n; $c; $k):
  if ([$n, $c, $k] | map(type == "number" and . == floor) | all) | not then
    error("pass_at_k: n, c, k must be integers, got \([$n, $c, $k])")
  elif $c < 0 or $c > $n or $k < 1 then
    error("pass_at_k: need 0 <= c <= n and k >= 1, got n=\($n) c=\($c) k=\($k)")
  elif $k > $n then null
  elif $n - $c < $k then 1
  else 1 - reduce range($n - $c + 1; $n + 1) as $i (1; . * (1 - $k / $i))
  end;
