package main

// The cluster's checkpoint store: SeaweedFS's S3 gateway (`weed mini`), as the
// S3-compatible store a production deployment's workers share (docs/operators.md,
// "Workspace checkpoints"). Every tacp worker of a run pushes its turns' workspace
// checkpoints there, with the store's credentials in its environment.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tacp-dev/tacp/checkpoint"
	"github.com/tacp-dev/tacp/internal/testkit/seaweedfs"
)

// s3Name is the store's name among the cluster's processes (State.PIDs).
const s3Name = "s3"

// s3Bucket holds the cluster's checkpoints, under the prefix "checkpoints".
const s3Bucket = "tacp"

// startS3 starts the store when a weed binary is found (seaweedfs.Binary), and records its
// endpoint and keys in st. The binary runs through a link in the state dir, so that `down`
// knows the process as the cluster's.
func (st *State) startS3(ctx context.Context) error {
	bin := seaweedfs.Binary()
	if bin == "" {
		if os.Getenv("TACP_REQUIRE_PEERS") == "1" {
			return fmt.Errorf("TACP_REQUIRE_PEERS=1 but %s", seaweedfs.Missing)
		}
		logf("%s: the workers keep their checkpoints in their data dir", seaweedfs.Missing)
		return nil
	}
	dir := filepath.Join(st.Dir, s3Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	link := filepath.Join(dir, "weed")
	if err := os.Symlink(bin, link); err != nil {
		return err
	}
	srv, cmd, err := seaweedfs.Command(link, dir)
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(st.logDir(), s3Name+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", link, err)
	}
	st.PIDs[s3Name] = track(cmd)
	st.S3 = srv
	if err := st.save(); err != nil {
		return err
	}
	exited := make(chan error)
	go func() {
		for st.running(st.PIDs[s3Name]) {
			time.Sleep(100 * time.Millisecond)
		}
		close(exited)
	}()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return srv.Ready(rctx, exited)
}

// checkpointStore is the workers' -checkpoint.store: the cluster's S3 store, or "" (their
// data dir's) when it runs none.
func (st *State) checkpointStore() string {
	if st.S3 == nil {
		return ""
	}
	return st.S3.URL(s3Bucket, "checkpoints")
}

// checkpoints reads the cluster's checkpoint store (URL "": none).
func (st *State) checkpoints() checkpoint.Reader {
	rd := checkpoint.Reader{URL: st.checkpointStore()}
	if st.S3 != nil {
		rd.Getenv = seaweedfs.Lookup(st.S3.Env())
	}
	return rd
}
