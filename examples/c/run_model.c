/* Compiles an ONNX model through mxc's C API, saves it, loads the .mxr again and runs it on
 * made-up inputs of the sizes given, printing each output's values.
 *
 *   cc run_model.c -I include -L target/release -lmxc -o run_model
 *   ./run_model MODEL.onnx OUT.mxr INPUT=DIMS...      e.g. image=1x3x8x8 (f32 inputs)
 *
 * Input element i is ((i % 17) - 8) / 16.0, so a test can make the same inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mxc.h"

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, mxc_last_error());
    return 1;
}

/* Parses NAME=AxBxC into `t` (f32, data allocated and filled). */
static int make_input(char *arg, mxc_tensor *t) {
    char *eq = strchr(arg, '=');
    if (!eq) return 0;
    *eq = '\0';
    t->name = arg;
    t->dtype = MXC_F32;
    t->rank = 0;
    size_t n = 1;
    for (char *d = strtok(eq + 1, "x"); d && t->rank < MXC_MAX_RANK; d = strtok(NULL, "x")) {
        t->dims[t->rank++] = strtoul(d, NULL, 10);
        n *= t->dims[t->rank - 1];
    }
    float *data = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) data[i] = (float)((int)(i % 17) - 8) / 16.0f;
    t->data = data;
    t->bytes = n * sizeof(float);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx OUT.mxr [INPUT=DIMS]...\n", argv[0]);
        return 2;
    }
    mxc_program *parsed = NULL, *loaded = NULL;
    if (mxc_load("no-such-file.mxr", &loaded) == MXC_OK) return 1;
    printf("a missing file: %s\n", mxc_last_error());

    if (mxc_parse_onnx(argv[1], NULL, 0, &parsed) != MXC_OK) return fail("parse");
    if (mxc_compile(parsed, "cpu") != MXC_OK) return fail("compile");
    if (mxc_save(parsed, argv[2]) != MXC_OK) return fail("save");
    mxc_free(parsed);
    if (mxc_load(argv[2], &loaded) != MXC_OK) return fail("load");
    if (mxc_set_threads(loaded, 1) != MXC_OK) return fail("threads");

    size_t n_inputs = (size_t)argc - 3, n_outputs = mxc_output_count(loaded);
    mxc_tensor *inputs = calloc(n_inputs ? n_inputs : 1, sizeof(mxc_tensor));
    mxc_tensor *outputs = calloc(n_outputs ? n_outputs : 1, sizeof(mxc_tensor));
    for (size_t i = 0; i < n_inputs; i++) {
        if (!make_input(argv[3 + i], &inputs[i])) {
            fprintf(stderr, "%s: expected NAME=DIMS\n", argv[3 + i]);
            return 2;
        }
    }
    /* too small a buffer says how large it must be */
    for (size_t i = 0; i < n_outputs; i++) outputs[i].bytes = 0;
    if (mxc_run(loaded, inputs, n_inputs, outputs, n_outputs) == MXC_OK) return 1;
    printf("a small buffer: %s\n", mxc_last_error());
    for (size_t i = 0; i < n_outputs; i++) outputs[i].data = malloc(outputs[i].bytes);
    if (mxc_run(loaded, inputs, n_inputs, outputs, n_outputs) != MXC_OK) return fail("run");

    for (size_t i = 0; i < n_outputs; i++) {
        const float *values = outputs[i].data;
        printf("output %s:", outputs[i].name);
        for (size_t j = 0; j < outputs[i].bytes / sizeof(float); j++) printf(" %.9g", values[j]);
        printf("\n");
        free(outputs[i].data);
    }
    for (size_t i = 0; i < n_inputs; i++) free(inputs[i].data);
    free(inputs);
    free(outputs);
    mxc_free(loaded);
    return 0;
}
