/* mxc: compile an ONNX model once, run it from C.
 *
 * Every function that can fail returns MXC_OK or MXC_ERROR; after an error,
 * mxc_last_error() says what failed, in the words the mxc command line uses (the file, the
 * input, the node). A program is made by mxc_parse_onnx or mxc_load and freed by mxc_free.
 * Running takes and fills buffers the caller owns; nothing a run returns needs freeing.
 * Link with -lmxc (libmxc.so, built by `cargo build --release -p mxc-capi`). */
#ifndef MXC_H
#define MXC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MXC_OK 0
#define MXC_ERROR 1

/* The most dimensions a tensor passed through this API has. */
#define MXC_MAX_RANK 16

/* Element types (the order of mx's types). */
typedef enum mxc_dtype {
    MXC_BOOL = 0,
    MXC_I8 = 1,
    MXC_I16 = 2,
    MXC_I32 = 3,
    MXC_I64 = 4,
    MXC_U8 = 5,
    MXC_U16 = 6,
    MXC_U32 = 7,
    MXC_U64 = 8,
    MXC_F16 = 9,
    MXC_BF16 = 10,
    MXC_F32 = 11,
    MXC_F64 = 12,
    MXC_F8E4M3FN = 13,
    MXC_F8E4M3FNUZ = 14,
    MXC_F8E5M2 = 15,
    MXC_F8E5M2FNUZ = 16,
    MXC_F8E8M0FNU = 17,
    MXC_F4E2M1FN = 18,
    MXC_I4 = 19,
    MXC_U4 = 20,
    MXC_I2 = 21,
    MXC_U2 = 22
} mxc_dtype;

/* A tensor in caller-owned memory, row-major and packed.
 * As an input: every field set by the caller; `bytes` is the size of `data`.
 * As an output: the caller sets `data` and `bytes` (the buffer's capacity); a run writes
 * `name`, `dtype`, `rank`, `dims` and sets `bytes` to the size written (or, when the buffer is
 * too small, to the size needed, and fails). */
typedef struct mxc_tensor {
    const char *name;
    mxc_dtype dtype;
    size_t rank;
    size_t dims[MXC_MAX_RANK];
    void *data;
    size_t bytes;
} mxc_tensor;

typedef struct mxc_program mxc_program;

/* The message of the last error on this thread ("" when none); valid until the next call. */
const char *mxc_last_error(void);

/* Reads the ONNX model at `path`. `shapes` are `n_shapes` strings in the command line's
 * --shape notation ("input=1x3x224x224", "input_ids=1xs[1..512]{128}"); may be NULL when
 * n_shapes is 0. Dimensions the model leaves open and no shape fixes are symbols in
 * [1..4096] (docs/shapes.md). */
int mxc_parse_onnx(const char *path, const char *const *shapes, size_t n_shapes, mxc_program **out);

/* Compiles a parsed program for `target`: "cpu", "ref" or "gpu". */
int mxc_compile(mxc_program *program, const char *target);

/* Writes a compiled program to `path` as an .mxr file (what `mxc compile` writes). */
int mxc_save(const mxc_program *program, const char *path);

/* Reads the compiled program in the .mxr file `path`. */
int mxc_load(const char *path, mxc_program **out);

/* The threads that run kernels (default: every core). */
int mxc_set_threads(mxc_program *program, size_t threads);

/* The inputs of a program (parsed or compiled) and the outputs of a compiled one (none before
 * it is compiled), by index; names are valid while the program lives, NULL past the end. */
size_t mxc_input_count(const mxc_program *program);
const char *mxc_input_name(const mxc_program *program, size_t index);
size_t mxc_output_count(const mxc_program *program);
const char *mxc_output_name(const mxc_program *program, size_t index);

/* Runs a compiled program on `n_inputs` named inputs, filling `n_outputs` outputs in the
 * program's order (n_outputs must be mxc_output_count). Inputs are read, never kept. */
int mxc_run(mxc_program *program, const mxc_tensor *inputs, size_t n_inputs, mxc_tensor *outputs,
            size_t n_outputs);

/* Frees a program (NULL is fine). */
void mxc_free(mxc_program *program);

#ifdef __cplusplus
}
#endif

#endif
