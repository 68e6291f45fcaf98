/* The tokens of a math answer (mexpr.h), for the parser: LaTeX commands
 * resolved, wrappers (\text{}, \mathrm{}, ...) opened, what is only layout
 * (spacing, \left, $, degrees, percent) dropped. */
#ifndef GRPO_ANSWER_MEXPR_LEX_H
#define GRPO_ANSWER_MEXPR_LEX_H

#include <stdbool.h>
#include <stddef.h>

#include "mexpr.h"

typedef enum {
    MT_END, MT_NUM, MT_VAR, MT_PI, MT_E, MT_INF, MT_PLUS, MT_MINUS, MT_MUL, MT_DIV, MT_POW, MT_BANG,
    MT_LPAREN, MT_RPAREN, MT_LBRACK, MT_RBRACK, MT_LBRACE, MT_RBRACE, MT_LSET, MT_RSET, MT_COMMA, MT_EQ,
    MT_CUP, MT_FRAC, MT_SQRT, MT_FUNC, MT_AMP, MT_ROWSEP, MT_BEGIN_MATRIX, MT_END_MATRIX, MT_UNIT
} mexpr_tok_kind;

typedef struct {
    mexpr_tok_kind kind;
    mexpr_func func;                 /* MT_FUNC */
    const char *text;                /* MT_NUM: its digits (may contain "{,}"), len bytes */
    size_t len;
    char name[MEXPR_NAME_MAX];       /* MT_VAR */
} mexpr_tok;

typedef struct {
    mexpr_tok t[MEXPR_MAX_TOKENS];
    int n;
} mexpr_toks;

/* Tokens of s[0..len), ending with MT_END; false when s holds something
 * that is no part of an expression (or is longer than the bounds). */
bool mexpr_lex(const char *s, size_t len, mexpr_toks *out);

#endif
