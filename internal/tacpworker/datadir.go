package tacpworker

import (
	"os"
	"path/filepath"
)

// DefaultDataDir is where tacp keeps its files: $XDG_DATA_HOME/tacp or ~/.local/share/tacp.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tacp")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tacp")
	}
	return filepath.Join(home, ".local", "share", "tacp")
}
