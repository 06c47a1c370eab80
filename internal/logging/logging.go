// Package logging builds the logger of tacp's processes: log/slog, JSON on stderr, at the
// level a -log.level flag names.
package logging

import (
	"fmt"
	"log/slog"
	"os"
)

// New returns a JSON slog logger on stderr at level (debug, info, warn or error).
func New(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
