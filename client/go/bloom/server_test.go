package bloom

// A bloom-server for the tests: the real binary ($BLOOM_SERVER_BIN) on 127.0.0.1:0 with a
// fresh temp data dir, and a self-signed TLS certificate for the TLS tests.

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testServer struct {
	target string
	cmd    *exec.Cmd
	log    *os.File
	dir    string
	args   []string
}

func startServer(t *testing.T, args ...string) *testServer {
	t.Helper()
	return startServerOn(t, "127.0.0.1:0", args...)
}

// startServerOn starts one listening on listen ("127.0.0.1:PORT": a pod that advertises it).
func startServerOn(t *testing.T, listen string, args ...string) *testServer {
	t.Helper()
	binary := os.Getenv("BLOOM_SERVER_BIN")
	if binary == "" {
		t.Fatal("BLOOM_SERVER_BIN must name the bloom-server binary")
	}
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{log: log, dir: dir, args: args}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			text, _ := os.ReadFile(log.Name())
			t.Logf("bloom-server log:\n%s", text)
		}
		log.Close()
	})
	s.start(t, listen)
	return s
}

// restart starts the server again on the same port and data dir (after kill).
func (s *testServer) restart(t *testing.T) {
	t.Helper()
	s.start(t, s.target)
}

func (s *testServer) start(t *testing.T, listen string) {
	t.Helper()
	portFile := filepath.Join(s.dir, "port")
	os.Remove(portFile)
	s.cmd = exec.Command(os.Getenv("BLOOM_SERVER_BIN"), append([]string{"--listen=" + listen,
		"--data_dir=" + filepath.Join(s.dir, "data"), "--port_file=" + portFile}, s.args...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if f, err := os.Open(portFile); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if port := strings.TrimSpace(line); port != "" {
				s.target = net.JoinHostPort("127.0.0.1", port)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("bloom-server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *testServer) kill() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// tokenFile writes a token file giving token `write` and token+"-r" `read`.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	line := func(token, role string) string {
		sum := sha256.Sum256([]byte(token))
		return fmt.Sprintf("%s %s go-test-%s\n", hex.EncodeToString(sum[:]), role, role)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(line(token, "write")+line(token+"-r", "read")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns their paths and a
// client TLS configuration that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, config *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "bloom-server test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDer, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDer}), 0o600)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
}
