/* inferno: a local LLM inference engine for Qwen3 models. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "multi-turn chat through the model's chat template"},
    {"bench", cmd_bench, "llama-bench style benchmark (pp, tg, time to first token)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"tokenize", cmd_tokenize, "text to token ids"},
    {"template", cmd_template, "render the chat template for a messages JSON file"},
    {"inspect", cmd_inspect, "show what is inside a GGUF file or Hugging Face folder"},
    {"quantize", cmd_quantize, "write a GGUF file of one of llama-quantize's types"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: inferno COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`inferno COMMAND --help` for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "inferno: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
