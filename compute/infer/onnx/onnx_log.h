/*
 * onnx_log.h — where the ONNX runtime's notes go: facts a reader of a run may want that are
 * no error (today the cuDNN algorithm chosen for each convolution shape, once per process).
 * The process sets one hook (gpujobd's inference module: its JSON log); without one the
 * notes go to stderr, one line each, so a test or `gpujobd bench onnx` shows them.
 */
#ifndef ONNX_LOG_H
#define ONNX_LOG_H

enum onnx_log_level { ONNX_LOG_DEBUG, ONNX_LOG_INFO };

typedef void (*onnx_log_fn)(enum onnx_log_level level, const char *message);

/* The hook for every later note (NULL: stderr). Set it before sessions run. */
void onnx_set_log(onnx_log_fn fn);

void onnx_log(enum onnx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
