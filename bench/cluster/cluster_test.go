package main

// TestClusterChaos brings a whole cluster up in a state directory of its own, runs the
// chaos kills against it and takes it down. It needs PostgreSQL 15 and minutes (the server
// build on a cold cache, four services), so it runs only with TACP_CLUSTER=1:
//
//	TACP_CLUSTER=1 go test ./bench/cluster -run TestClusterChaos -v -timeout 30m

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestClusterChaos(t *testing.T) {
	if os.Getenv("TACP_CLUSTER") != "1" {
		t.Skip("set TACP_CLUSTER=1 to build and start a multi-service Temporal cluster and kill its services")
	}
	dir, err := os.MkdirTemp("", "tacp-cluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	// up creates the directory itself and refuses one holding a cluster's state.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	o := options{
		dir: dir, pgBin: envOr("TACP_CLUSTER_PG_BIN", "/usr/lib/postgresql/15/bin"), logLevel: "warn", shards: 4,
		timeout: 25 * time.Minute, chunks: 250, every: 20 * time.Millisecond, killAfter: time.Second, rounds: 1,
	}
	st, err := up(ctx, o)
	t.Cleanup(func() {
		if err := down(dir); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	rep, err := chaos(ctx, st, o)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if len(rep.Kills) != len(KillOrder) {
		t.Fatalf("%d kills, want %d", len(rep.Kills), len(KillOrder))
	}
	for _, k := range rep.Kills {
		t.Logf("%s killed: prompt acknowledged after %s, status after %s", k.Service, k.Ack, k.Query)
	}
}
