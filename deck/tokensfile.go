package deck

// The tokens file (Options.TokensFile): the deck's people, one a line, with their tokens
// hashed, so the file holds nothing that signs anyone in. Its format:
//
//	# NAME ROLE sha256:HEX [GROUP,GROUP...]
//	alice controller sha256:13c18c373d0bc19b31ad4b754c8420046fb16f0f7c44216a1903d6952ccb6250 team,reviewers
//	bob   observer   sha256:fa38ca43dca0268f34efd02b12f3068917c3269d2b8088e1b583b2657ab30588
//
// NAME and each GROUP are names of [A-Za-z0-9._-] (1-64), ROLE is controller or observer,
// HEX is the SHA-256 of the token's secret in 64 lowercase hex digits (TokenLine, `starter
// token`). '#' begins a comment; blank lines are skipped. No name and no hash may appear
// twice, in the file or among the flags' tokens.
//
// The deck reads the file at New, again whenever its content changes (its SHA-256, checked
// every Options.TokensPoll: a Kubernetes ConfigMap's symlink swap is a change like any
// other; new content is taken when two checks agree on it) and on Reload (starter web's
// SIGHUP). A reading that fails keeps the tokens the deck has; so does one that would leave
// no controller token.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tacp-dev/tacp/signals"
)

// defaultTokensPoll is Options.TokensPoll unset.
const defaultTokensPoll = 2 * time.Second

// hashPrefix begins the hash of a tokens file's line.
const hashPrefix = "sha256:"

// TokensFileError is why a tokens file was refused: the file, the line (0 for the file as a
// whole) and the reason. It never quotes a line's hash.
type TokensFileError struct {
	Path   string
	Line   int
	Reason string
}

func (e *TokensFileError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("deck: tokens file %s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("deck: tokens file %s:%d: %s", e.Path, e.Line, e.Reason)
}

// TokenLine is the tokens file's line for a person name with role whose token's secret is
// secret, in groups; it refuses what the file would refuse.
func TokenLine(name, role string, groups []string, secret string) (string, error) {
	if err := signals.ValidateProfileName(name); err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	if role != signals.RoleController && role != signals.RoleObserver {
		return "", fmt.Errorf("role %q: want %s or %s", role, signals.RoleController, signals.RoleObserver)
	}
	if err := checkGroups(groups); err != nil {
		return "", err
	}
	if secret == "" {
		return "", errors.New("the secret is empty")
	}
	sum := sha256.Sum256([]byte(secret))
	line := name + " " + role + " " + hashPrefix + hex.EncodeToString(sum[:])
	if len(groups) > 0 {
		line += " " + strings.Join(groups, ",")
	}
	return line, nil
}

func checkGroups(groups []string) error {
	for i, g := range groups {
		if err := signals.ValidateProfileName(g); err != nil {
			return fmt.Errorf("group: %w", err)
		}
		if slices.Contains(groups[:i], g) {
			return fmt.Errorf("group %q is listed twice", g)
		}
	}
	return nil
}

// parseTokensFile reads the tokens of a tokens file's content data, refusing a name or a
// hash that fixed (the flags' tokens) has too.
func parseTokensFile(path string, data []byte, fixed tokens) (tokens, error) {
	var out tokens
	names := map[string]int{} // a name's line, -1 for a flag's token
	sums := map[[sha256.Size]byte]int{}
	for _, k := range fixed {
		if k.name != "" {
			names[k.name] = -1
		}
		sums[k.sum] = -1
	}
	where := func(line int) string {
		if line < 0 {
			return "a token given as a flag"
		}
		return fmt.Sprintf("line %d", line)
	}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		fail := func(format string, a ...any) error {
			return &TokensFileError{Path: path, Line: n, Reason: fmt.Sprintf(format, a...)}
		}
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 || len(f) > 4 {
			return nil, fail("want NAME ROLE sha256:HEX [GROUP,GROUP...], found %d fields", len(f))
		}
		name, role, hash := f[0], f[1], f[2]
		if err := signals.ValidateProfileName(name); err != nil {
			return nil, fail("name: %v", err)
		}
		if role != signals.RoleController && role != signals.RoleObserver {
			return nil, fail("role %q: want %s or %s", role, signals.RoleController, signals.RoleObserver)
		}
		digits, ok := strings.CutPrefix(hash, hashPrefix)
		if !ok || !isLowerHex(digits, 2*sha256.Size) {
			return nil, fail("the hash is not sha256: and %d lowercase hex digits", 2*sha256.Size)
		}
		var sum [sha256.Size]byte
		_, _ = hex.Decode(sum[:], []byte(digits))
		var groups []string
		if len(f) == 4 {
			groups = strings.Split(f[3], ",")
			if err := checkGroups(groups); err != nil {
				return nil, fail("%v", err)
			}
		}
		if at, dup := names[name]; dup {
			return nil, fail("%s is named twice (also %s): each person needs a token of their own", name, where(at))
		}
		if at, dup := sums[sum]; dup {
			return nil, fail("the same token as %s", where(at))
		}
		names[name], sums[sum] = n, n
		out = append(out, token{sum: sum, role: role, name: name, groups: groups})
	}
	return out, nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// newKeyring holds fixed and, when path is set, the tokens of the file at path, watched
// every poll until close. At least one of them must be a controller's.
func newKeyring(fixed tokens, path string, poll time.Duration, log *slog.Logger) (*keyring, error) {
	kr := &keyring{fixed: fixed, path: path, poll: poll}
	if kr.poll <= 0 {
		kr.poll = defaultTokensPoll
	}
	if path == "" {
		if !fixed.haveController() {
			return nil, errors.New("deck: at least one controller token is required")
		}
		all := slices.Clone(fixed)
		kr.cur.Store(&all)
		return kr, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("deck: tokens file: %w", err)
	}
	all, err := kr.parse(data)
	if err != nil {
		return nil, err
	}
	kr.cur.Store(&all)
	kr.sum = sha256.Sum256(data)
	kr.last = kr.sum
	log.Info("deck tokens file read", kr.counts(all)...)
	kr.stop, kr.done = make(chan struct{}), make(chan struct{})
	go kr.watch(log)
	return kr, nil
}

// parse is the flags' tokens and those of the file's content data, which must leave a
// controller token.
func (kr *keyring) parse(data []byte) (tokens, error) {
	fromFile, err := parseTokensFile(kr.path, data, kr.fixed)
	if err != nil {
		return nil, err
	}
	all := append(slices.Clone(kr.fixed), fromFile...)
	if !all.haveController() {
		return nil, &TokensFileError{Path: kr.path, Reason: "no controller token: the file lists none and no flag gives one"}
	}
	return all, nil
}

func (kr *keyring) counts(all tokens) []any {
	return []any{"file", kr.path, "tokens", len(all), "from_file", len(all) - len(kr.fixed),
		"controllers", all.count(signals.RoleController), "observers", all.count(signals.RoleObserver)}
}

// reload reads the tokens file again and puts its tokens in place when it parses. Unless
// force, content the deck holds already, or whose refusal it logged already, changes
// nothing and logs nothing; and new content is taken only once two readings a poll apart
// agree, so that a file caught half written (an editor truncates, then writes) is not
// taken for a file that lists fewer people.
func (kr *keyring) reload(log *slog.Logger, force bool) error {
	if kr.path == "" {
		return nil
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	refuse := func(key string, err error) error {
		if force || key != kr.failed {
			log.Error("deck tokens file refused; the deck keeps its tokens", "file", kr.path, "err", err)
		}
		kr.failed = key
		return err
	}
	data, err := os.ReadFile(kr.path)
	if err != nil {
		return refuse("read: "+err.Error(), fmt.Errorf("deck: tokens file: %w", err))
	}
	sum := sha256.Sum256(data)
	key := "content: " + hex.EncodeToString(sum[:])
	if !force {
		settled := sum == kr.last
		kr.last = sum
		if sum == kr.sum {
			kr.failed = "" // the file is back to what the deck holds
			return nil
		}
		if !settled || key == kr.failed {
			return nil
		}
	}
	all, err := kr.parse(data)
	if err != nil {
		return refuse(key, err)
	}
	kr.cur.Store(&all)
	kr.sum, kr.last, kr.failed = sum, sum, ""
	log.Info("deck tokens reloaded", kr.counts(all)...)
	return nil
}

// watch reloads the tokens file every kr.poll until close.
func (kr *keyring) watch(log *slog.Logger) {
	defer close(kr.done)
	t := time.NewTicker(kr.poll)
	defer t.Stop()
	for {
		select {
		case <-kr.stop:
			return
		case <-t.C:
			_ = kr.reload(log, false)
		}
	}
}

// close stops the watch of the tokens file and waits for it.
func (kr *keyring) close() {
	if kr.stop == nil {
		return
	}
	kr.closeOnce.Do(func() { close(kr.stop) })
	<-kr.done
}

// Reload reads the tokens file (Options.TokensFile) again and puts its tokens in place of
// the file's previous ones; the flags' tokens stay. A file that cannot be read or parsed,
// or that would leave no controller token, changes nothing: the deck keeps its tokens, logs
// why, and Reload returns it (a *TokensFileError for what the file says). Without a tokens
// file Reload does nothing.
func (s *Server) Reload() error { return s.tokens.reload(s.log, true) }

// Close stops the deck's watch of its tokens file. The deck still serves after Close, with
// the tokens it has.
func (s *Server) Close() error {
	s.tokens.close()
	return nil
}
