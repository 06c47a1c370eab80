package cli

// Who answers from the CLI: every answer to a person's request (a permission, a question, a
// limit's retry) records who gave it (answered_by). The CLI names its person by --as (or
// TACP_AS), else as the operating system knows them: cli:USER@HOST.

import (
	"flag"
	"os"
	"os/user"
	"strings"

	"github.com/tacp-dev/tacp/signals"
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

// accessFlags declares the flags that say whose a new session is: --owner (the person the
// doors people use know by that name: a deck token's NAME), --sharing and --share. A CLI
// holds the namespace's credentials and so speaks for the deployment: without --owner a
// session is nobody's, and every person of a deck may act on it.
func accessFlags(fs *flag.FlagSet) func() (signals.Access, error) {
	owner := fs.String("owner", "", "a new session's owner: the person (a deck token's NAME) whose session it is; empty: nobody's, the team's")
	sharing := fs.String("sharing", "", "a new session's sharing rule: private, team-watch or team-act (empty: the deck's)")
	var shares shareList
	fs.Var(&shares, "share", "share a new session: WHO=ROLE, WHO a person or group:NAME, ROLE controller or observer (repeated, or comma-separated)")
	return func() (signals.Access, error) {
		a := signals.Access{Owner: *owner, Sharing: *sharing, SharedWith: shares}
		return a, signals.ValidateAccess(a)
	}
}

type shareList []signals.Share

func (l *shareList) String() string {
	var out []string
	for _, s := range *l {
		out = append(out, s.String())
	}
	return strings.Join(out, ",")
}

func (l *shareList) Set(v string) error {
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		s, err := signals.ParseShare(e)
		if err != nil {
			return err
		}
		*l = append(*l, s)
	}
	return nil
}
