package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tacp-dev/tacp/codec"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
)

// The S3-compatible store against a real one: SeaweedFS's S3 gateway, started here. Each
// subtest keeps its checkpoints under a prefix of its own.
func TestS3Store(t *testing.T) {
	srv := seaweedfs.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	open := func(t *testing.T, prefix string, keys *codec.Keys) *Shadows {
		t.Helper()
		st, err := OpenStore(ctx, srv.URL("tacp-checkpoints", prefix), keys)
		if err != nil {
			t.Fatal(err)
		}
		return &Shadows{Dir: filepath.Join(t.TempDir(), "checkpoints"), Store: st}
	}
	keys := testKeys(t)

	t.Run("restores on another worker", func(t *testing.T) {
		testRestoresOnAnotherWorker(t, open(t, "restore", nil))
	})
	t.Run("sealed, restores on another worker", func(t *testing.T) {
		testRestoresOnAnotherWorker(t, open(t, "restore-sealed", keys))
	})
	// A worker that holds turn 1 fetches only turn 2's bundle, whose prerequisite it has.
	t.Run("a stale workspace catches up", func(t *testing.T) {
		testBehind(t, open(t, "behind", keys))
	})
	t.Run("forks", func(t *testing.T) {
		testRestoreFromForks(t, open(t, "fork", keys))
	})

	// What the store holds is sealed: no object shows a file's content, a reader without the
	// keys is refused by name, and a reader with them reads the diff git shows.
	t.Run("sealed objects, diff and export", func(t *testing.T) {
		a := open(t, "sealed", keys)
		ws := t.TempDir()
		secret := "the launch code is " + base64.StdEncoding.EncodeToString(randomBytes(t, 12))
		write(t, ws, "plan.txt", secret+"\n")
		if _, err := a.Checkpoint(ctx, "s5", ws, 1, "first"); err != nil {
			t.Fatal(err)
		}
		write(t, ws, "plan.txt", secret+"\nand more\n")
		if _, err := a.Checkpoint(ctx, "s5", ws, 2, "second"); err != nil {
			t.Fatal(err)
		}
		for key, b := range rawObjects(t, a.Store.s3, "s5") {
			if !bytes.HasPrefix(b, []byte(sealMagic+keys.Current+"\n")) || bytes.Contains(b, []byte("launch code")) || bytes.Contains(b, []byte("refs/tacp")) {
				t.Errorf("object %s is not sealed: %q", key, clip(string(b), 80))
			}
		}
		if _, err := (Reader{URL: a.Store.URL}).Diff(ctx, "s5", 2, false); err == nil || !strings.Contains(err.Error(), "sealed with codec key") {
			t.Errorf("diff without the keys: %v, want a refusal naming the key", err)
		}
		rd := Reader{URL: a.Store.URL, Keys: keys}
		diff, err := rd.Diff(ctx, "s5", 2, false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.open(ctx, "s5", ws)
		if err != nil {
			t.Fatal(err)
		}
		want, err := r.git(ctx, nil, "diff", "--no-color", TurnRef("s5", 1), TurnRef("s5", 2))
		if err != nil {
			t.Fatal(err)
		}
		if diff != want || !strings.Contains(diff, "+and more") {
			t.Errorf("diff of turn 2 =\n%s\nwant git's\n%s", diff, want)
		}
		user := t.TempDir()
		userGit(t, user, "init", "-q")
		if _, err := rd.Export(ctx, "s5", 0, "tacp/s5", user); err != nil {
			t.Fatal(err)
		}
		if log := gitOut(t, user, "log", "--format=%s", "tacp/s5"); log != "turn 2: second\nturn 1: first" {
			t.Errorf("exported branch log = %q", log)
		}
	})

	// A turn stores what it changed: after a turn that wrote 1 MiB of random text (~770 KiB
	// compressed), a one-line change stores a bundle of a few hundred bytes.
	t.Run("incremental", func(t *testing.T) {
		a := open(t, "incremental", nil)
		ws := t.TempDir()
		write(t, ws, "blob.bin", base64.StdEncoding.EncodeToString(randomBytes(t, 3<<18)))
		write(t, ws, "small.txt", "one\n")
		if _, err := a.Checkpoint(ctx, "s6", ws, 1, "big"); err != nil {
			t.Fatal(err)
		}
		write(t, ws, "small.txt", "one\ntwo\n")
		if _, err := a.Checkpoint(ctx, "s6", ws, 2, "small"); err != nil {
			t.Fatal(err)
		}
		objs := rawObjects(t, a.Store.s3, "s6")
		first, second := len(objs["s6/"+bundleName(1)]), len(objs["s6/"+bundleName(2)])
		if first < 512<<10 || second == 0 || second > 4<<10 {
			t.Errorf("bundles: turn 1 %d bytes, turn 2 %d bytes; want turn 1 over 512 KiB, turn 2 a few hundred bytes", first, second)
		}
	})

	// Retention reads which sessions the bucket holds and removes them with every object.
	t.Run("sessions and delete", func(t *testing.T) {
		a := open(t, "retention", keys)
		ws := t.TempDir()
		write(t, ws, "a.txt", "a\n")
		for _, s := range []string{"r1", "r2"} {
			if _, err := a.Checkpoint(ctx, s, ws, 1, "one"); err != nil {
				t.Fatal(err)
			}
		}
		rd := Reader{URL: a.Store.URL, Keys: keys}
		got, err := rd.Sessions(ctx)
		if err != nil || len(got) != 2 || got[0].ID != "r1" || got[1].ID != "r2" || time.Since(got[0].Last) > time.Hour {
			t.Fatalf("sessions = %+v, %v; want r1 and r2, just checkpointed", got, err)
		}
		if err := rd.Delete(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		if got, err := rd.Sessions(ctx); err != nil || len(got) != 1 || got[0].ID != "r2" {
			t.Errorf("sessions after deleting r1 = %+v, %v", got, err)
		}
		if _, err := rd.Commit(ctx, "r1", 0); !errors.Is(err, ErrNone) {
			t.Errorf("r1's checkpoint after delete: %v, want ErrNone", err)
		}
	})

	t.Run("bad URLs are refused", func(t *testing.T) {
		for _, u := range []string{"s3://", "s3://b/p?endpoit=x", "s3://b/p?endpoint=" + srv.Endpoint + "&path_style=maybe"} {
			if _, err := OpenStore(ctx, u, nil); err == nil {
				t.Errorf("OpenStore(%q): no error", u)
			}
		}
	})
}

func testKeys(t *testing.T) *codec.Keys {
	t.Helper()
	k, err := codec.ParseKeys("k1:" + base64.StdEncoding.EncodeToString(randomBytes(t, codec.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	return &k
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// rawObjects reads the session's objects as the store holds them, by key below the prefix.
func rawObjects(t *testing.T, st *s3Store, session string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	list, err := st.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &st.bucket, Prefix: aws.String(st.key(session, ""))})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Contents {
		obj, err := st.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &st.bucket, Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj.Body)
		_ = obj.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(aws.ToString(o.Key), st.prefix)] = b
	}
	if len(out) == 0 {
		t.Fatalf("no objects of session %s", session)
	}
	return out
}
