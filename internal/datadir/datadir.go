// Package datadir names where tacp keeps its files on a machine; the worker and the starter
// (which reads the worker's default checkpoint store) agree through it.
package datadir

import (
	"os"
	"path/filepath"
)

// Default is where tacp keeps its files: $XDG_DATA_HOME/tacp or ~/.local/share/tacp.
func Default() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "tacp")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tacp")
	}
	return filepath.Join(home, ".local", "share", "tacp")
}
