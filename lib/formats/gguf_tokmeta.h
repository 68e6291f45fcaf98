/* The text side of a GGUF export: llama.cpp's tokenizer.* metadata and a
 * general.name, from the GGUF file or Hugging Face directory the model's
 * tokenizer comes from. */
#ifndef GRPO_GGUF_TOKMETA_H
#define GRPO_GGUF_TOKMETA_H

#include "../util/err.h"
#include "gguf_meta.h"

/* Appends to out every tokenizer.* key of source for a model of vocab_size
 * tokens, and sets *name (xmalloc'd) for general.name.
 *
 * A .gguf source: its tokenizer.* keys copied as they are, in file order;
 * name = its general.name (else the file name without ".gguf").
 * A directory: built from tokenizer.json the way llama.cpp's
 * convert_hf_to_gguf.py does for byte-level BPE ("gpt2"): tokens by id
 * (added tokens by their content; ids the tokenizer lacks up to vocab_size
 * become "[PAD<id>]", type unused), token_type (1 normal, 3 control = special
 * added token, 4 user-defined = other added token), merges as "a b", pre
 * from the pre_tokenizer (tokenizer.h's TOK_PRE_NAMES), bos/eos/padding
 * ids from tokenizer_config.json's bos_token/eos_token/pad_token, else
 * generation_config.json, else config.json; unknown_token_id from
 * model.unk_token; add_bos_token/add_eos_token
 * from tokenizer_config.json, else from tokenizer.json's TemplateProcessing
 * post-processor; tokenizer.chat_template from tokenizer_config.json (a
 * list of named templates: "default" there, the others as
 * tokenizer.chat_template.NAME) or chat_template.jinja. name = the
 * directory's base name.
 *
 * Errors: EX_NOINPUT missing source or tokenizer.json; EX_DATAERR a
 * tokenizer GGUF cannot express or whose size differs from vocab_size
 * (naming the file and what is wrong); EX_IOERR unreadable. */
int gguf_tok_meta(gguf_meta *out, char **name, const char *source, int vocab_size, gerr *e);

#endif
