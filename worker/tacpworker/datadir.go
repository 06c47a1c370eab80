package tacpworker

import "github.com/tacp-dev/tacp/internal/datadir"

// DefaultDataDir is where tacp keeps its files: $XDG_DATA_HOME/tacp or ~/.local/share/tacp.
func DefaultDataDir() string { return datadir.Default() }
