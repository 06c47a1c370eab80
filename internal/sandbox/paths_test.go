package sandbox

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// One filesystem on /, a second on /data; /srv/ws shows /data/shared (a bind mount) and
// /home/u/proj/mnt shows /data/tacp.
var testMounts = []Mount{
	{Dev: "8:1", Root: "/", Point: "/"},
	{Dev: "8:2", Root: "/", Point: "/data"},
	{Dev: "8:2", Root: "/shared", Point: "/srv/ws"},
	{Dev: "8:2", Root: "/tacp", Point: "/home/u/proj/mnt"},
	{Dev: "0:5", Root: "/", Point: "/proc"},
	{Dev: "8:2", Root: "/tacp/workspaces/s1/.git/hooks", Point: "/data/tacp/workspaces/s1/.git/hooks"},
}

func TestExposes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		grant, protec string
		want          bool
	}{
		{"the path itself", "/data/tacp", "/data/tacp", true},
		{"an ancestor", "/data", "/data/tacp", true},
		{"the root", "/", "/data/tacp", true},
		{"beneath it: what the rules are for", "/data/tacp/workspaces/s1", "/data/tacp", false},
		{"a sibling sharing a prefix", "/data/tacp2", "/data/tacp", false},
		{"a sibling", "/data/other", "/data/tacp", false},
		{"an unrelated tree", "/usr", "/data/tacp", false},
		{"a bind mount of an ancestor", "/srv/ws", "/data/shared/tacp", true},
		{"a bind mount beside it", "/srv/ws", "/data/tacp", false},
		{"mounted beneath the grant", "/home/u/proj", "/data/tacp", true},
		{"mounted beneath the grant, a part of it", "/home/u/proj", "/data/tacp/workspaces", true},
		{"mounted beneath the grant, an ancestor of it", "/home/u", "/data", true},
		{"the mount's sibling folder", "/home/u/other", "/data/tacp", false},
		{"another filesystem at the same path inside", "/proc", "/data/tacp", false},
		{"a part of the grant mounted inside it", "/data/tacp/workspaces/s1", "/data/tacp", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Exposes(testMounts, tc.grant, tc.protec))
		})
	}
}

func TestExposesWithoutMountsGoesByPath(t *testing.T) {
	require.True(t, Exposes(nil, "/a", "/a/b"))
	require.False(t, Exposes(nil, "/a/b", "/a"))
	require.False(t, Exposes(nil, "/a/bc", "/a/b"))
}

func TestParseMountinfo(t *testing.T) {
	in := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"40 22 8:2 /a\\040b /mnt/with\\040space rw - ext4 /dev/sdb rw\n" +
		"short line\n"
	ms, err := ParseMountinfo(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, []Mount{{Dev: "8:1", Root: "/", Point: "/"}, {Dev: "8:2", Root: "/a b", Point: "/mnt/with space"}}, ms)
}

func TestInstallation(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/python3": "/usr/bin/python3",
		"/opt/agents/x.py": "/opt/agents/x.py",
		"/w/.ci/npm/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js": "/w/.ci/npm/node_modules",
		"/w/node_modules/a/node_modules/b/bin.js":                                     "/w/node_modules",
		"/node_modules": "/node_modules",
	} {
		require.Equal(t, want, installation(in), in)
	}
}

// FuzzExposes holds the rules' invariants for any grant and protected path: what lies by path
// in one the other contains is exposed exactly when the grant is the ancestor, whatever the
// mounts; a grant exposes everything beneath a path it exposes.
func FuzzExposes(f *testing.F) {
	f.Add("/data", "/data/tacp", "/home/u/x")
	f.Add("/srv/ws", "/data/shared/x", "/data/shared")
	f.Add("/a/b/../c", "/a/c/d", "/")
	f.Fuzz(func(t *testing.T, g, p, q string) {
		g, p, q = path.Clean("/"+g), path.Clean("/"+p), path.Clean("/"+q)
		ms := append(testMounts, Mount{Dev: "8:2", Root: p, Point: q})
		if within(p, g) {
			require.True(t, Exposes(ms, g, p), "a grant exposes what lies beneath it")
		}
		// What a grant reaches by path or as an ancestor of p's own tree, it reaches beneath
		// p too (a grant that reaches only a part of p mounted beneath it does not reach all
		// of p: g "/srv" with "/" of a disk whose "/shared" is at "/srv/ws").
		gd, gf, _ := locate(ms, g)
		pd, pf, _ := locate(ms, p)
		if within(p, g) || (gd == pd && within(pf, gf)) {
			require.True(t, Exposes(ms, g, path.Join(p, "child")), "and whatever lies beneath that")
		}
		if within(g, p) && g != p && !Exposes(testMounts, g, p) {
			require.False(t, Exposes(nil, g, p), "a grant strictly beneath a path does not expose it by path")
		}
	})
}
