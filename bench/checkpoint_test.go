package bench

// Workspace checkpoints (issue 37): what a turn's checkpoint costs on a sizeable repository
// and what a restore on a fresh worker costs. No Temporal: the checkpoint package alone, on
// real git.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
)

// TestCheckpointTable prints the checkpoint time (p50, p90) and the bytes stored per turn
// (the shadow repository and the store together) of 20 turns that each change 10 files of a
// 10,000-file, 200 MB workspace, and the time of a restore on a worker that has none of it:
// with the embedded store (a bare repository in the data dir) and with an S3-compatible
// store (a real SeaweedFS on this machine, sealed with a codec key).
//
//	TACP_BENCH_CHECKPOINT=1 go test ./bench -run TestCheckpointTable -v
func TestCheckpointTable(t *testing.T) {
	if os.Getenv("TACP_BENCH_CHECKPOINT") != "1" {
		t.Skip("set TACP_BENCH_CHECKPOINT=1 to measure checkpoints")
	}
	ctx := context.Background()
	ws := t.TempDir()
	const files, fileBytes = 10_000, 20 << 10
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
	t.Run("embedded", func(t *testing.T) {
		data := t.TempDir()
		st, err := checkpoint.OpenStore(ctx, checkpoint.DefaultStoreURL(data), nil)
		if err != nil {
			t.Fatal(err)
		}
		checkpointTable(t, ws, data, st, func() int64 { return du(t, data) })
	})
	t.Run("s3", func(t *testing.T) {
		srv := seaweedfs.Start(t)
		for _, kv := range srv.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		key := make([]byte, codec.KeySize)
		_, _ = rand.Read(key)
		keys, err := codec.ParseKeys("bench:" + base64.StdEncoding.EncodeToString(key))
		if err != nil {
			t.Fatal(err)
		}
		data := t.TempDir()
		st, err := checkpoint.OpenStore(ctx, srv.URL("bench", "checkpoints"), &keys)
		if err != nil {
			t.Fatal(err)
		}
		checkpointTable(t, ws, data, st, func() int64 { return du(t, data) + bucketBytes(t, srv, "bench") })
	})
}

// checkpointTable checkpoints ws into st, turn after turn, and restores it on a fresh worker;
// stored is what the shadows in data and the store hold.
func checkpointTable(t *testing.T, ws, data string, st *checkpoint.Store, stored func() int64) {
	const changed, turns, fileBytes = 10, 20, 20 << 10
	ctx := context.Background()
	session := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sh := &checkpoint.Shadows{Dir: filepath.Join(data, "checkpoints", "sessions"), Store: st}
	start := time.Now()
	if _, err := sh.Checkpoint(ctx, session, ws, 1, "first"); err != nil {
		t.Fatal(err)
	}
	t.Logf("first checkpoint (the whole workspace): %v, %.1f MB stored", time.Since(start).Round(time.Millisecond), float64(stored())/1e6)
	buf := make([]byte, fileBytes)
	var took []time.Duration
	var grew []int64
	for turn := int64(2); turn < 2+turns; turn++ {
		for j := range changed {
			p := filepath.Join(ws, fmt.Sprintf("d%02d", j), fmt.Sprintf("f%05d.bin", int(turn)*changed+j*100))
			_, _ = rand.Read(buf)
			if err := os.WriteFile(p, buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := stored()
		start := time.Now()
		res, err := sh.Checkpoint(ctx, session, ws, turn, "turn")
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
		grew = append(grew, stored()-before)
		if res.FilesChanged != changed {
			t.Fatalf("turn %d: %d files changed, want %d", turn, res.FilesChanged, changed)
		}
	}
	slices.Sort(took)
	slices.Sort(grew)
	t.Logf("checkpoint of a turn that changed %d files: p50 %v, p90 %v; stored p50 %.2f MB, max %.2f MB",
		changed, took[len(took)/2].Round(time.Millisecond), took[len(took)*9/10].Round(time.Millisecond),
		float64(grew[len(grew)/2])/1e6, float64(grew[len(grew)-1])/1e6)

	fresh := &checkpoint.Shadows{Dir: filepath.Join(t.TempDir(), "sessions"), Store: st}
	start = time.Now()
	if _, err := fresh.Restore(ctx, session, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore on a fresh worker: %v", time.Since(start).Round(time.Millisecond))
}

// bucketBytes is the size of every object in bucket.
func bucketBytes(t *testing.T, srv *seaweedfs.Server, bucket string) int64 {
	t.Helper()
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKeyID, srv.SecretAccessKey, ""),
	})
	var n int64
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			n += aws.ToInt64(o.Size)
		}
	}
	return n
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
