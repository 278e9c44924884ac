package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestAuthHashCmd(t *testing.T) {
	var out, errb bytes.Buffer
	if code := authCmd([]string{"hash", "--cost", "4"}, strings.NewReader("s3cret\n"), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	h := strings.TrimSpace(out.String())
	if bcrypt.CompareHashAndPassword([]byte(h), []byte("s3cret")) != nil {
		t.Fatalf("printed %q, not a hash of the password", h)
	}
	for _, args := range [][]string{{}, {"nope"}, {"hash", "extra"}, {"hash", "--cost", "99"}} {
		if code := authCmd(args, strings.NewReader("pw\n"), &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code := authCmd([]string{"hash"}, strings.NewReader("\n"), &out, &errb); code != 2 {
		t.Errorf("empty password: exit %d, want 2", code)
	}
	// bcrypt reads at most 72 bytes: a longer password is bad input.
	errb.Reset()
	if code := authCmd([]string{"hash", "--cost", "4"}, strings.NewReader(strings.Repeat("p", 73)+"\n"), &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "72 bytes") {
		t.Errorf("73-byte password: exit %d (%q), want 2 naming the 72-byte limit", code, errb.String())
	}
	if code := authCmd([]string{"hash", "--cost", "4"}, strings.NewReader(strings.Repeat("p", 72)), &out, &errb); code != 0 {
		t.Errorf("72-byte password: exit %d, want 0", code)
	}
}

func TestParseServe_Security(t *testing.T) {
	dir := t.TempDir()
	h, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("alice:admin:"+string(h)+"\n"), 0o600)
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("0123456789abcdef-from-file\n"), 0o600)
	multi := []string{"--node-id", "a", "--initial-cluster", "a=127.0.0.1:1@127.0.0.1:2,b=127.0.0.1:3@127.0.0.1:4"}

	c, _, err := parseServe(nil, noEnv)
	if err != nil || c.users != nil || c.secret != "" || c.tls != nil || !c.api.StrictInput {
		t.Fatalf("defaults: auth, secret and TLS off, input limits on: %+v %v", c, err)
	}
	c, _, err = parseServe(append([]string{"--auth-file", users, "--cluster-secret-file", secretFile}, multi...), noEnv)
	if err != nil || c.users == nil || c.secret != "0123456789abcdef-from-file" {
		t.Fatalf("auth file and secret file: %v", err)
	}
	cc, _ := c.clusterConfig()
	if cc.ClusterSecret != c.secret {
		t.Fatalf("cluster config lacks the secret")
	}
	c, _, err = parseServe([]string{"--auth-file", users}, func(k string) string {
		return map[string]string{"HEUREKA_CLUSTER_SECRET": "0123456789abcdef"}[k]
	})
	if err != nil || c.secret != "0123456789abcdef" {
		t.Fatalf("secret from env: %v", err)
	}
	for name, args := range map[string][]string{
		"missing auth file":         {"--auth-file", filepath.Join(dir, "none")},
		"short secret":              {"--cluster-secret", "short"},
		"secret and file":           {"--cluster-secret", "0123456789abcdef", "--cluster-secret-file", secretFile},
		"auth multi-node no secret": append([]string{"--auth-file", users}, multi...),
		"auth join no secret":       {"--auth-file", users, "--join", "127.0.0.1:9"},
		"cert without key":          {"--tls-cert", users},
		"ca without cert":           {"--tls-client-ca", users},
		"raft tls without cert":     {"--raft-tls"},
	} {
		if _, _, err := parseServe(args, noEnv); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// A single node may use auth without a secret.
	if _, _, err := parseServe([]string{"--auth-file", users}, noEnv); err != nil {
		t.Fatalf("single node with auth: %v", err)
	}
}

// TestParseServe_ClusterBeyondLoopback: a multi-node cluster that listens
// beyond loopback needs a secret, or --insecure-cluster said out loud; on
// loopback, or as a single node, it starts as before.
func TestParseServe_ClusterBeyondLoopback(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if code := secretCmd([]string{"init", secretFile}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("secret init: exit %d", code)
	}
	wide := "a=10.0.0.1:8762@10.0.0.1:8761,b=10.0.0.2:8762@10.0.0.2:8761"
	refused := map[string][]string{
		"http on all interfaces": {"--node-id", "a", "--initial-cluster", wide, "--http-addr", "0.0.0.0:8761", "--raft-addr", "127.0.0.1:8762", "--raft-advertise", "10.0.0.1:8762"},
		"raft on an address":     {"--node-id", "a", "--initial-cluster", wide, "--raft-addr", "10.0.0.1:8762"},
		"joiner on a host name":  {"--join", "10.0.0.1:8761", "--http-addr", "node-a:8761", "--raft-addr", "0.0.0.0:8762", "--raft-advertise", "10.0.0.3:8762"},
	}
	for name, args := range refused {
		_, _, err := parseServe(args, noEnv)
		if err == nil || !strings.Contains(err.Error(), "--cluster-secret-file") || !strings.Contains(err.Error(), "--insecure-cluster") {
			t.Errorf("%s: %v, want a refusal naming the fix", name, err)
		}
		if _, _, err := parseServe(append(args, "--cluster-secret-file", secretFile), noEnv); err != nil {
			t.Errorf("%s with a secret: %v", name, err)
		}
		if _, _, err := parseServe(append(args, "--insecure-cluster"), noEnv); err != nil {
			t.Errorf("%s with --insecure-cluster: %v", name, err)
		}
	}
	for name, args := range map[string][]string{
		"loopback cluster":   {"--node-id", "a", "--initial-cluster", "a=127.0.0.1:1@127.0.0.1:2,b=127.0.0.1:3@127.0.0.1:4", "--http-addr", "127.0.0.1:2", "--raft-addr", "127.0.0.1:1"},
		"single node, wide":  {"--http-addr", "0.0.0.0:8761"},
		"localhost joiner":   {"--join", "127.0.0.1:8761", "--http-addr", "localhost:8771", "--raft-addr", "127.0.0.1:8772"},
		"the image defaults": nil,
	} {
		if _, _, err := parseServe(args, noEnv); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSecretInit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s")
	var out bytes.Buffer
	if code := secretCmd([]string{"init", file}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	first, _ := os.ReadFile(file)
	secret, err := readClusterSecret("", file)
	if err != nil || len(secret) < 40 {
		t.Fatalf("secret %q: %v", secret, err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if code := secretCmd([]string{"init", file}, &out, io.Discard); code != 0 {
		t.Fatalf("second run: exit %d", code)
	}
	if again, _ := os.ReadFile(file); string(again) != string(first) {
		t.Fatal("a second init replaced the secret")
	}
	other := filepath.Join(dir, "other")
	_ = secretCmd([]string{"init", other}, io.Discard, io.Discard)
	if b, _ := os.ReadFile(other); string(b) == string(first) {
		t.Fatal("two inits made the same secret")
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	if code := secretCmd([]string{"init", empty}, io.Discard, io.Discard); code != 1 {
		t.Errorf("an empty existing file: exit %d, want 1", code)
	}
	for _, args := range [][]string{{"make", file}, {"init"}, {"init", "--owner", "x", filepath.Join(dir, "o")}, {"init", file, "extra"}} {
		if code := secretCmd(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if os.Geteuid() == 0 {
		owned := filepath.Join(dir, "owned")
		if code := secretCmd([]string{"init", "--owner", "10001:10002", owned}, io.Discard, io.Discard); code != 0 {
			t.Fatalf("--owner: exit %d", code)
		}
		st, _ := os.Stat(owned)
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 10001 || sys.Gid != 10002 {
			t.Errorf("--owner 10001:10002: owner %+v", st.Sys())
		}
	}
}

// The secret given one way on serve's command line wins over the other
// way's variable, as in the operator CLI.
func TestParseServe_SecretFlagBeatsTheOtherVariable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if code := secretCmd([]string{"init", file}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatal("secret init failed")
	}
	fromFile, err := readClusterSecret("", file)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HEUREKA_CLUSTER_SECRET": "0123456789abcdef-from-env"}
	sc, _, err := parseServe([]string{"--cluster-secret-file", file}, func(k string) string { return env[k] })
	if err != nil || sc.secret != fromFile {
		t.Fatalf("--cluster-secret-file beside HEUREKA_CLUSTER_SECRET: %v (secret %q)", err, sc.secret)
	}
	env = map[string]string{"HEUREKA_CLUSTER_SECRET_FILE": file}
	sc, _, err = parseServe([]string{"--cluster-secret", "0123456789abcdef-from-flag"}, func(k string) string { return env[k] })
	if err != nil || sc.secret != "0123456789abcdef-from-flag" {
		t.Fatalf("--cluster-secret beside HEUREKA_CLUSTER_SECRET_FILE: %v (secret %q)", err, sc.secret)
	}
	if _, _, err := parseServe([]string{"--cluster-secret", "0123456789abcdef-from-flag", "--cluster-secret-file", file},
		func(string) string { return "" }); err == nil {
		t.Fatal("both flags given: accepted")
	}
}

// secret init's --help is help (exit 0, usage on stdout), as every other
// command's; and a secret file others can read is pointed out.
func TestSecretInit_HelpAndAReadableFile(t *testing.T) {
	for _, args := range [][]string{{"init", "--help"}, {"init", "-h"}} {
		var out, errb bytes.Buffer
		if code := secretCmd(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "heureka secret init") {
			t.Errorf("%v: exit %d, stdout %q", args, code, out.String())
		}
	}
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("0123456789abcdef0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := secretCmd([]string{"init", file}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "readable by others") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := secretCmd([]string{"init", file}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("a private file: exit %d, stderr %q", code, errb.String())
	}
}

// A secret travels in a header: one with a space or a control character
// inside would make every node-to-node call fail, so it is refused.
func TestReadClusterSecret_PrintableASCIIOnly(t *testing.T) {
	for _, secret := range []string{"0123456789abcdef\n0123456789abcdef", "0123456789abcdef 0123456789abcdef", "0123456789abcdef\x000123456789abcdef", "0123456789abcdefé0123456789abcdef"} {
		if _, err := readClusterSecret(secret, ""); err == nil {
			t.Errorf("%q accepted", secret)
		}
	}
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("  0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readClusterSecret("", file); err != nil || got != "0123456789abcdef0123456789abcdef" {
		t.Errorf("a file's surrounding space is trimmed: %q, %v", got, err)
	}
}
