package main

// The Temporal services' configuration: the server's config file (four services on
// loopback, PostgreSQL 15) and its dynamic config, written into the state directory.

import (
	"bytes"
	"os"
	"path/filepath"
	"text/template"
)

var configTemplate = template.Must(template.New("config").Parse(`# Written by tacp bench/cluster: four services on loopback, PostgreSQL 15.
log:
  stdout: true
  level: {{.LogLevel}}

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{.Shards}}
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: tcp
        user: {{.User}}
        password: {{.Pass}}
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: tcp
        user: {{.User}}
        password: {{.Pass}}
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"

services:
{{- range $name, $p := .Ports}}
  {{$name}}:
    rpc:
      grpcPort: {{$p.GRPC}}
      membershipPort: {{$p.Membership}}
      bindOnLocalHost: true
{{- if $p.HTTP}}
      httpPort: {{$p.HTTP}}
{{- end}}
{{- end}}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "{{.Frontend}}"

dcRedirectionPolicy:
  policy: noop

archival:
  history:
    state: disabled
  visibility:
    state: disabled

namespaceDefaults:
  archival:
    history:
      state: disabled
    visibility:
      state: disabled

dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))

// dynamicConfig matches devserver's settings, except that search attributes are read
// through the cache as in production (devserver forces a refresh on every read).
const dynamicConfig = `frontend.enableUpdateWorkflowExecution:
  - value: true
frontend.enableUpdateWorkflowExecutionAsyncAccepted:
  - value: true
system.enableEagerWorkflowStart:
  - value: true
system.enableActivityEagerExecution:
  - value: true
history.transferProcessorMaxPollRPS:
  - value: 1000
history.timerProcessorMaxPollRPS:
  - value: 1000
history.MaxBufferedQueryCount:
  - value: 32
limit.maxIDLength:
  - value: 255
`

func (st *State) writeConfig() error {
	dc := filepath.Join(st.Dir, "dynamicconfig.yaml")
	if err := os.WriteFile(dc, []byte(dynamicConfig), 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	err := configTemplate.Execute(&b, map[string]any{
		"LogLevel": st.LogLevel, "Shards": st.Shards, "PGPort": st.PGPort, "User": pgUser, "Pass": pgPass,
		"Ports": st.Ports, "Frontend": st.Frontend(), "DynamicConfig": dc,
	})
	if err != nil {
		return err
	}
	st.Config = st.configPath()
	return os.WriteFile(st.Config, b.Bytes(), 0o644)
}

func (st *State) configPath() string { return filepath.Join(st.Dir, "temporal.yaml") }
