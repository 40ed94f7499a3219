/*
 * module_parts.h — what the inference module brings to the rest of the binary through
 * module.h beyond its routes: the worker pool's placement as its batchers' GPU
 * accounting, the gRPC listener, and `gpujobd run`'s model repository.
 */
#ifndef GJ_INFER_MODULE_PARTS_H
#define GJ_INFER_MODULE_PARTS_H

struct gj_placement;
struct gj_server;

/* Makes p the GPU accounting of the batchers (compute/infer/serving/gpu_accounting.h):
 * loaded models reserve their device memory there, beside jobs, and least-loaded model
 * placement reads running tasks and free memory from it (gpu_accounting.c). Idempotent;
 * detach removes it (a release after that goes nowhere). */
void gj_infer_gpu_accounting_attach(struct gj_placement *p);
void gj_infer_gpu_accounting_detach(void);

/* Triton's GRPCInferenceService at --grpc-listen (grpc_listen.c), in the api and all
 * roles: with the HTTP server's certificate and key, or its own when that one is plain
 * HTTP (--insecure-http) and gRPC is not (--grpc-insecure). 0 (also when no
 * --grpc-listen), or -1 logged. */
int gj_infer_grpc_listen(struct gj_server *srv, const char *cert, const char *key);
void gj_infer_grpc_unlisten(struct gj_server *srv);

/* `gpujobd run`: the model repository of models_dir, when it is there, handed to the
 * `infer` kind (serving_host.h) (run_host.c). What run_close takes, or NULL. */
void *gj_infer_run_open(const char *models_dir);
void gj_infer_run_close(void *repo);

#endif
