// Command fakemodel serves one of internal/testkit/fakemodel's fake model APIs on a fixed address,
// to point a real agent at by hand, and logs each request it answers:
//
//	go run ./internal/testkit/fakemodel/cmd/fakemodel -provider anthropic -addr 127.0.0.1:18081
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/tacp-dev/tacp/internal/testkit/fakemodel"
)

func main() {
	provider := flag.String("provider", "anthropic", "the API to speak: anthropic, openai or gemini")
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on")
	dump := flag.String("dump", "", "a directory to write each request's body to (SEQ.json)")
	flag.Parse()
	s, err := fakemodel.Listen(fakemodel.Provider(*provider), *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
	defer s.Close()
	fmt.Printf("%s fake model at %s\n%s\n", *provider, s.URL, strings.Join(s.Env(), "\n"))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	seen := 0
	for {
		select {
		case <-stop:
			return
		case <-s.Changed():
		}
		for _, r := range s.Requests()[seen:] {
			fmt.Printf("%d %s %s model=%q tools=%d messages=%d\n", r.Seq, r.Method, r.Path, r.Model, len(r.Tools), len(r.Messages))
			seen++
			if *dump != "" {
				_ = os.WriteFile(filepath.Join(*dump, fmt.Sprintf("%d.json", r.Seq)), r.Body, 0o644)
			}
		}
	}
}
