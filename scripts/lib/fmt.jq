# Text formatting for the report scripts (jq 1.6 has no printf).

# fixed($d): a number as text with $d decimals (half away from zero); null or a non-number: "-".
def fixed($d):
  if type != "number" then "-"
  else (if . < 0 then "-" else "" end) as $sign
    | (fabs * pow(10; $d) | round | tostring) as $digits
    | if $d == 0 then $sign + $digits
      else ("0" * ([$d + 1 - ($digits | length), 0] | max)) + $digits
        | $sign + .[:length - $d] + "." + .[length - $d:]
      end
    | if test("^-0(\\.0*)?$") then .[1:] else . end
  end;

# lpad($w) / rpad($w): text padded with spaces on the left / right to $w characters.
def lpad($w): tostring | (" " * ([$w - length, 0] | max)) + .;
def rpad($w): tostring | . + (" " * ([$w - length, 0] | max));
