package sandbox

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRefusedNamesThePathTheSandboxDoesNotGrant(t *testing.T) {
	r := newPlanRig(t)
	p, err := r.plan(Settings{})
	require.NoError(t, err)
	js, err := json.Marshal(p)
	require.NoError(t, err)
	env := []string{"HOME=" + r.home, PolicyEnv + "=" + string(js)}
	outside := filepath.Join(filepath.Dir(r.data), "elsewhere", "transcripts")
	hooks := filepath.Join(r.ws, ".git", "hooks")
	p.Protect = append(p.Protect, hooks)
	js, err = json.Marshal(p)
	require.NoError(t, err)
	withHooks := []string{PolicyEnv + "=" + string(js)}

	for _, tc := range []struct {
		name    string
		env     []string
		printed string
		want    string
	}{
		{"go's PathError", env, "testagent: mkdir " + outside + ": permission denied", outside},
		{"node's error code", env, "Error: EACCES: permission denied, mkdir '" + outside + "'", outside},
		{"python's PermissionError", env, "PermissionError: [Errno 13] Permission denied: '" + outside + "'", outside},
		{"a shell's redirect", env, "bash: " + outside + ": Permission denied", outside},
		{"among earlier lines", env, "starting | loading " + r.ws + " | open " + outside + ": permission denied", outside},
		{"a grant named before the refused path", env, "cp " + r.ws + "/a " + outside + ": Permission denied", outside},
		{"a protected path in the workspace", withHooks, "open " + hooks + "/pre-commit: read-only file system", hooks + "/pre-commit"},
		{"a path the sandbox grants: not the sandbox's doing", env, "open " + filepath.Join(r.ws, "f") + ": permission denied", ""},
		{"a path in the temp folder", env, "mkdir " + filepath.Join(r.tmp, "x") + ": permission denied", ""},
		{"no refusal", env, "error: " + outside + " is not a directory", ""},
		{"no path", env, "fatal: permission denied", ""},
		{"unsandboxed", []string{"HOME=" + r.home}, "mkdir " + outside + ": permission denied", ""},
		{"nothing printed", env, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Refused(tc.env, tc.printed))
		})
	}
}
