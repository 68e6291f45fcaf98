/* A build without CUDA: the entries of cuda.h answer "not here", so tools
 * choose the CPU and say why when asked for the GPU. */
#include "cuda.h"

bool cuda_built(void) { return false; }
int cuda_device_count(void) { return 0; }
int cuda_open(gerr *e) { return gerr_set(e, EX_UNAVAILABLE, "this build has no CUDA support (make CUDA=1)"); }
int cuda_open_device(int index, gerr *e) {
    (void)index;
    return cuda_open(e);
}
int cuda_nccl_load(gerr *e) { return cuda_open(e); }
int cuda_nccl_id(unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e) {
    (void)id;
    return cuda_open(e);
}
int cuda_nccl_init(int rank, int size, const unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e) {
    (void)rank, (void)size, (void)id;
    return cuda_open(e);
}
int cuda_nccl_sum(float *buf, size_t n, gerr *e) {
    (void)buf, (void)n;
    return cuda_open(e);
}
void cuda_close(void) {}
const backend *backend_cuda(void) { return NULL; }
int cuda_sync(gerr *e) {
    (void)e;
    return 0;
}
void cuda_device_name(char *buf, size_t n) {
    if (n) buf[0] = 0;
}
int cuda_alloc(void **p, size_t bytes, gerr *e) {
    (void)bytes;
    *p = NULL;
    return cuda_open(e);
}
void cuda_free(void *p) { (void)p; }
int cuda_upload(void *dst, const void *src, size_t bytes, gerr *e) {
    (void)dst, (void)src, (void)bytes;
    return cuda_open(e);
}
int cuda_download(void *dst, const void *src, size_t bytes, gerr *e) {
    (void)dst, (void)src, (void)bytes;
    return cuda_open(e);
}
size_t cuda_peak_bytes(void) { return 0; }
int cuda_sample_plain(const float *logits, int n, int V, double temperature, rng_stream *const *rng, int32_t *tok,
                      float *logp, gerr *e) {
    (void)logits, (void)n, (void)V, (void)temperature, (void)rng, (void)tok, (void)logp;
    return cuda_open(e);
}
int cuda_philox(uint32_t *out, const uint32_t *counter, const uint32_t *key, int n, gerr *e) {
    (void)out, (void)counter, (void)key, (void)n;
    return cuda_open(e);
}
