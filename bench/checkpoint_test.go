package bench

// Workspace checkpoints (issue 37): what a turn's checkpoint costs on a sizeable repository
// and what a restore on a fresh worker costs. No Temporal: the checkpoint package alone, on
// real git.

import (
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tacp-dev/tacp/checkpoint"
)

// TestCheckpointTable prints the checkpoint time (p50, p90) and the bytes stored per turn
// (the shadow repository and the store together) of 20 turns that each change 10 files of a
// 10,000-file, 200 MB workspace, and the time of a restore on a worker that has none of it.
//
//	TACP_BENCH_CHECKPOINT=1 go test ./bench -run TestCheckpointTable -v
func TestCheckpointTable(t *testing.T) {
	if os.Getenv("TACP_BENCH_CHECKPOINT") != "1" {
		t.Skip("set TACP_BENCH_CHECKPOINT=1 to measure checkpoints")
	}
	const files, fileBytes, changed, turns = 10_000, 20 << 10, 10, 20
	ctx := context.Background()
	data, ws := t.TempDir(), t.TempDir()
	buf := make([]byte, fileBytes)
	for i := range files {
		_, _ = rand.Read(buf)
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := checkpoint.OpenStore(ctx, checkpoint.DefaultStoreURL(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	sh := &checkpoint.Shadows{Dir: filepath.Join(data, "checkpoints", "sessions"), Store: st}
	start := time.Now()
	if _, err := sh.Checkpoint(ctx, "bench", ws, 1, "first"); err != nil {
		t.Fatal(err)
	}
	t.Logf("first checkpoint (the whole workspace): %v, %.1f MB stored", time.Since(start).Round(time.Millisecond), float64(du(t, data))/1e6)
	var took []time.Duration
	var stored []int64
	for turn := int64(2); turn < 2+turns; turn++ {
		for j := range changed {
			p := filepath.Join(ws, fmt.Sprintf("d%02d", j), fmt.Sprintf("f%05d.bin", int(turn)*changed+j*100))
			_, _ = rand.Read(buf[:64])
			if err := os.WriteFile(p, buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := du(t, data)
		start := time.Now()
		res, err := sh.Checkpoint(ctx, "bench", ws, turn, "turn")
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
		stored = append(stored, du(t, data)-before)
		if res.FilesChanged != changed {
			t.Fatalf("turn %d: %d files changed, want %d", turn, res.FilesChanged, changed)
		}
	}
	slices.Sort(took)
	slices.Sort(stored)
	t.Logf("checkpoint of a turn that changed %d of %d files: p50 %v, p90 %v; stored p50 %.2f MB, max %.2f MB",
		changed, files, took[len(took)/2].Round(time.Millisecond), took[len(took)*9/10].Round(time.Millisecond),
		float64(stored[len(stored)/2])/1e6, float64(stored[len(stored)-1])/1e6)

	fresh := &checkpoint.Shadows{Dir: filepath.Join(t.TempDir(), "sessions"), Store: st}
	start = time.Now()
	if _, err := fresh.Restore(ctx, "bench", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore on a fresh worker: %v", time.Since(start).Round(time.Millisecond))
}

// du is the bytes of the files under dir.
func du(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
