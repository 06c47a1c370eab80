// Package docker holds the container files; no Docker engine runs where the tests run, so
// these tests check what can be checked without one: the compose file parses and names the
// images, ports and health checks the README promises, and the Dockerfile builds with the
// command CI runs.
package docker

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
}

func TestComposeNamesTheServicesTheREADMEPromises(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(b, &c))
	images := map[string]string{}
	for name, s := range c.Services {
		images[name] = s.Image
	}
	require.Equal(t, "postgres:15", images["postgresql"])
	require.True(t, strings.HasPrefix(images["temporal"], "temporalio/auto-setup:"), images["temporal"])
	require.True(t, strings.HasPrefix(images["temporal-ui"], "temporalio/ui:"), images["temporal-ui"])
	require.Equal(t, "tacp", images["worker"])
	require.Equal(t, []string{"127.0.0.1:7233:7233"}, c.Services["temporal"].Ports)
	require.Equal(t, []string{"127.0.0.1:8080:8080"}, c.Services["temporal-ui"].Ports)
	for _, name := range []string{"postgresql", "temporal", "worker"} {
		require.NotNil(t, c.Services[name].Healthcheck, "%s has a health check", name)
	}
	require.Equal(t, "docker/Dockerfile", c.Services["worker"].Build.Dockerfile)
	require.Equal(t, "temporal:7233", c.Services["worker"].Environment["TEMPORAL_ADDRESS"])

	// The server reads tacp's dynamic config, and that file sets what the embedded server sets.
	require.Contains(t, c.Services["temporal"].Volumes, "./dynamicconfig:/etc/temporal/config/dynamicconfig:ro")
	require.Equal(t, "config/dynamicconfig/tacp.yaml", c.Services["temporal"].Environment["DYNAMIC_CONFIG_FILE_PATH"])
	b, err = os.ReadFile("dynamicconfig/tacp.yaml")
	require.NoError(t, err)
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(b, &dc))
	for key, want := range map[string]any{
		"history.transferProcessorMaxPollRPS": 1000,
		"history.timerProcessorMaxPollRPS":    1000,
		"system.enableActivityEagerExecution": true,
		"history.MaxBufferedQueryCount":       32,
	} {
		require.Len(t, dc[key], 1, key)
		require.Equal(t, want, dc[key][0].Value, key)
	}
}

var buildLine = regexp.MustCompile(`CGO_ENABLED=0 go build -o (?:"[^"]*"|\S+) (\./\S+(?: \./\S+)*)`)

func TestDockerfileBuildsWhatCIBuilds(t *testing.T) {
	dockerfile, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	d := buildLine.FindStringSubmatch(string(dockerfile))
	c := buildLine.FindStringSubmatch(string(ci))
	require.NotNil(t, d, "the Dockerfile's build command")
	require.NotNil(t, c, ".ci/run's build command")
	require.Equal(t, c[1], d[1], "the Dockerfile builds the packages CI builds")
	require.Contains(t, string(dockerfile), "FROM golang:1.26.8", "the Go of go.mod")
}
