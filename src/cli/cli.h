/* The inferno program's subcommands. Each takes argv after the command name
 * (argv[0] is the command) and returns the process exit status. */
#ifndef INF_CLI_CLI_H
#define INF_CLI_CLI_H

int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_quantize(int argc, char **argv);

/* The default generated model, used when -m is not given. */
#define INF_DEFAULT_MODEL "models/tiny-q8_0.gguf"

#endif
