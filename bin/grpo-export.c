/* grpo-export: a checkpoint out as a Hugging Face directory, a PEFT adapter
 * or a GGUF file. Flags here; the work is in lib/export. */
#include <stdlib.h>
#include <string.h>

#include "export/export.h"
#include "io/outpath.h"
#include "ops/blas.h"
#include "util/err.h"
#include "util/flags.h"

int main(int argc, char **argv) {
    /* the LoRA merge runs through OpenBLAS: the kernels grpo-rollout uses
     * give the weights grpo-rollout computes from the same adapter */
    blas_ensure_fast_kernels(argv);
    export_opts o = {0};
    const char *format = NULL, *dtype = "auto";
    const flag_spec flags[] = {
        {"--model", NULL, FLAG_STRING, &o.model, "M",
         "checkpoint: HF directory, our checkpoint (full or adapter), or .gguf (required)", 0, 0, NULL},
        {"--format", NULL, FLAG_CHOICE, &format, "hf|peft|gguf", "what to write (required)", 0, 0, "hf|peft|gguf"},
        {"--out", NULL, FLAG_STRING, &o.out, "PATH", "output: a directory for hf and peft, a file for gguf (required)",
         0, 0, NULL},
        {"--base-model", NULL, FLAG_STRING, &o.base_model, "NAME_OR_DIR",
         "peft only: base_model_name_or_path, a Hub id or a Hugging Face directory; none: the absolute path of "
         "the base the adapter was trained on",
         0, 0, NULL},
        {"--dtype", NULL, FLAG_CHOICE, &dtype, "T",
         "f32, f16, bf16, q8_0 or q4_k (gguf only: q4_k's matrices of rows not whole 256-value super-blocks "
         "q8_0), or auto: bf16 for hf, f32 for peft, f16 for gguf (whose vectors and routers stay f32)", 0, 0,
         "auto|f32|f16|bf16|q8_0|q4_k"},
        {"--progress", NULL, FLAG_BOOL, &o.progress, NULL,
         "progress on stderr even when it is not a terminal: loading, then the tensors written", 0, 0, NULL},
        {"--clamp", NULL, FLAG_BOOL, &o.clamp, NULL,
         "write a weight beyond what --dtype holds as its largest (f16: +-65504) instead of refusing", 0, 0, NULL},
    };
    flag_parser p = {
        .usage = "grpo-export --model M --format hf|peft|gguf --out PATH [--dtype f32|f16|bf16|q8_0|q4_k] "
                 "[--base-model NAME_OR_DIR] [--clamp] [--progress]",
        .summary =
            "Converts a checkpoint for other tools.\n"
            "  hf    a Hugging Face model directory (transformers, vLLM): config.json (torch_dtype set to the\n"
            "        dtype), model.safetensors (HF names, any LoRA adapter merged in), tokenizer.json,\n"
            "        tokenizer_config.json, generation_config.json (copied from the model, or built from a\n"
            "        GGUF's metadata); gpt-oss's experts loaded from MXFP4 blocks and not trained stay MXFP4\n"
            "        blocks, with config.json's quantization_config (but with f32).\n"
            "  peft  the LoRA adapter of an adapter checkpoint alone: adapter_model.safetensors and\n"
            "        adapter_config.json, as PEFT saves them; base_model_name_or_path is --base-model, else the\n"
            "        base's absolute path (a GGUF base gets a note: PEFT loads a Hugging Face directory).\n"
            "  gguf  one GGUF file for llama.cpp and ollama, any LoRA adapter merged in; norms and biases\n"
            "        stay f32; experts loaded from MXFP4 blocks and not trained stay MXFP4 (but with f32).\n"
            "Every weight is checked against --dtype before anything is written: one beyond what it holds\n"
            "(f16: |x| <= 65504; q8_0: a block's max |x| / 127 is an f16; q4_k: max |x| / 63 is an f16) is\n"
            "exit 65 naming the tensor and a dtype that holds it, unless --clamp (a note on stderr counts\n"
            "the weights it changed).\n"
            "Directories are built under a temporary name and swapped in whole, files renamed into place:\n"
            "a failed run leaves --out as it was. A symlink's target is replaced; a device, FIFO or\n"
            "/dev/fd/N gets a gguf in place.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof *flags),
        .epilog = "An adapter checkpoint's base model is found as formats/checkpoint.md says: relative to the\n"
                  "checkpoint, then absolute, then as stored from the current directory.\n"
                  "For PEFT from a GGUF base: grpo-export --model BASE.gguf --format hf --dtype f32 --out base-hf,\n"
                  "then grpo-export --model CKPT --format peft --base-model base-hf --out adapter.\n"
                  "Besides the codes below: q8_0 or q4_k with hf or peft is 64, --base-model without peft, or naming a\n"
                  "file or a directory without config.json, 64; --base-model of another shape than the base 65,\n"
                  "a path that does not exist (and is no Hub id) 66; --format peft of a model without an\n"
                  "adapter 65; hf or gguf of a directory without tokenizer.json 66, one whose tokenizer files do not load 65;\n"
                  "an --out that cannot be created (its directory missing, a file where a directory goes;\n"
                  "checked before any work) 73; a weight beyond --dtype (without --clamp) or non-finite 65.\n"
                  "example: grpo-export --model runs/ckpt-0042 --format gguf --dtype q8_0 --out policy.gguf",
    };
    flags_parse(&p, argc, argv);
    if (!o.model) die(EX_USAGE, "--model is required (see %s --help)", tool_name());
    if (!format) die(EX_USAGE, "--format is required (see %s --help)", tool_name());
    if (!o.out) die(EX_USAGE, "--out is required (see %s --help)", tool_name());
    gerr e = {0};
    if (export_format_parse(format, &o.format, &e)) die_err(&e);
    o.dtype = export_default_dtype(o.format);
    if (strcmp(dtype, "auto") && export_dtype_parse(dtype, &o.dtype, &e)) die_err(&e);
    if (outpath_check(o.out, o.format == EXPORT_GGUF ? OUTPATH_FILE : OUTPATH_DIR, &e)) die_err(&e);
    char *note;
    if (export_run(&o, &note, &e)) die_err(&e);
    if (note) warn("note: %s", note);
    free(note);
    return 0;
}
