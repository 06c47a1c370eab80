package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tacp-dev/tacp/devserver"
	"github.com/tacp-dev/tacp/signals"
)

// writeTLS makes a CA and a certificate for 127.0.0.1 signed by it, as PEM files in dir.
func writeTLS(t *testing.T, dir string) devserver.TLSFiles {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tacp test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	files := devserver.TLSFiles{
		CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"), CAFile: filepath.Join(dir, "ca.pem"),
	}
	write := func(path, typ string, der []byte) {
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	}
	write(files.CAFile, "CERTIFICATE", caDER)
	write(files.CertFile, "CERTIFICATE", der)
	write(files.KeyFile, "EC PRIVATE KEY", keyDER)
	return files
}

func TestWorkerAndStarterConnectOverTLS(t *testing.T) {
	t.Parallel()
	files := writeTLS(t, t.TempDir())
	tlsSrv, err := devserver.Start(ctxFor(t, 60*time.Second), devserver.Options{TLS: &files})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tlsSrv.Stop() })

	// A client that does not trust the CA is refused.
	_, err = client.DialContext(ctxFor(t, 5*time.Second), client.Options{HostPort: tlsSrv.HostPort(), Logger: quietSDK{}})
	require.Error(t, err)

	env := []string{
		"TEMPORAL_ADDRESS=" + tlsSrv.HostPort(),
		"TEMPORAL_NAMESPACE=" + tlsSrv.Namespace(),
		"TEMPORAL_TLS=true",
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + files.CAFile,
	}
	queue := "tacp-tls-" + signals.NewID()[:8]
	startWorkerProcess(t, queue, env...)

	id := session(t)
	cmd := starterCmd(ctxFor(t, 60*time.Second), "prompt", "--session", id, "--task-queue", queue, "over TLS")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	require.NoError(t, err, string(out))
	require.True(t, strings.Contains(string(out), "over TLS"), string(out))
}

// quietSDK drops an SDK client's logs.
type quietSDK struct{}

func (quietSDK) Debug(string, ...any) {}
func (quietSDK) Info(string, ...any)  {}
func (quietSDK) Warn(string, ...any)  {}
func (quietSDK) Error(string, ...any) {}
