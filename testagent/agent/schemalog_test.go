package agent

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With SchemaLogEnv set, a message the client sends that does not hold to the schema is
// appended to the log; one that holds is not; the bytes pass through unchanged.
func TestTheWireCheckLogsWhatDoesNotHoldToTheSchema(t *testing.T) {
	log := filepath.Join(t.TempDir(), "violations.log")
	t.Setenv(SchemaLogEnv, log)
	good := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n"
	bad := `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":7}}` + "\n"
	in, out := checkedWire(strings.NewReader(good+bad), io.Discard)
	got, err := io.ReadAll(in)
	if err != nil || string(got) != good+bad {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := out.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("session/new")) || bytes.Contains(b, []byte("initialize")) {
		t.Fatalf("the log holds:\n%s", b)
	}
}
