package cli

// Who answers from the CLI: every answer to a person's request (a permission, a question, a
// limit's retry) records who gave it (answered_by). The CLI names its person by --as (or
// TACP_AS), else as the operating system knows them: cli:USER@HOST.

import (
	"os"
	"os/user"
)

// cliIdentity is the answered_by of an answer from this CLI, as.
func cliIdentity(as string) string {
	if as != "" {
		return as
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, _ := os.Hostname()
	if host == "" {
		return "cli:" + name
	}
	return "cli:" + name + "@" + host
}
