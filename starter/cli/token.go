package cli

// `starter token`: a line of the deck's tokens file (starter web --tokens-file) for one
// person. The secret is generated (or read from stdin) and shown once, on stderr, for the
// person; the line, which holds only the secret's SHA-256, goes to stdout for the file.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tacp-dev/tacp/deck"
)

// maxSecretBytes bounds what --secret-stdin reads.
const maxSecretBytes = 4096

func cmdToken(_ context.Context, e *env, fs *flag.FlagSet, args []string) int {
	name := fs.String("name", "", "the person the token stands for, a name of [A-Za-z0-9._-] (1-64): their answers record deck:NAME")
	role := fs.String("role", "", "controller (may read and act) or observer (may only read)")
	groups := fs.String("groups", "", "the person's groups, comma-separated names of [A-Za-z0-9._-]")
	fromStdin := fs.Bool("secret-stdin", false, fmt.Sprintf("read the secret from stdin (at least %d characters) instead of generating one", minSecret))
	if !e.parse(fs, args, false) {
		return exitError
	}
	switch {
	case fs.NArg() > 0:
		return e.fail(fmt.Errorf("token takes no arguments, found %q", strings.Join(fs.Args(), " ")))
	case *name == "":
		return e.fail(errors.New("--name is required"))
	case *role == "":
		return e.fail(errors.New("--role is required: controller or observer"))
	}
	secret := newToken()
	if *fromStdin {
		var err error
		if secret, err = readSecret(os.Stdin); err != nil {
			return e.fail(err)
		}
	}
	line, err := deck.TokenLine(*name, *role, splitTokens(*groups), secret)
	if err != nil {
		return e.fail(err)
	}
	if !*fromStdin {
		fmt.Fprintf(e.err, "%s's token, shown only now (the tokens file keeps its hash; give it to %s, who signs in with it):\n%s\n", *name, *name, secret)
	}
	fmt.Fprintln(e.out, line)
	return exitOK
}

// readSecret is the secret on r: its first line, trimmed, of at least minSecret characters.
func readSecret(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the secret from stdin: %w", err)
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("the secret on stdin is longer than %d bytes", maxSecretBytes)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	secret := strings.TrimSpace(first)
	if len(secret) < minSecret {
		return "", fmt.Errorf("the secret on stdin has %d characters; want at least %d", len(secret), minSecret)
	}
	return secret, nil
}
