package e2e

// The Java unit tests of spring-boot-starter-heureka
// (clients/spring-boot-starter-heureka/src/test: the watcher against a
// fake server on 127.0.0.1, the subset configurer, the service URL order),
// run by Maven offline: `make deps` fetched what they need when it built and
// tested the starter.

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpringStarterUnitTests(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Maven and a JVM")
	}
	mvn, err := exec.LookPath("mvn")
	if err == nil {
		_, err = exec.LookPath("java")
	}
	ToolOrSkip(t, "starter unit", err)
	dir, _ := filepath.Abs("../clients/spring-boot-starter-heureka")
	cmd := exec.Command(mvn, "-o", "-B", "test")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	text := string(out)
	var summary []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "Tests run:") || strings.Contains(l, "FAIL") {
			summary = append(summary, l)
		}
	}
	t.Logf("mvn -o test:\n%s", strings.Join(summary, "\n"))
	if err != nil && strings.Contains(text, "offline mode") {
		ToolOrSkip(t, "starter unit", errors.New("Maven's local repository lacks the starter's test dependencies (run `make deps`)"))
	}
	if err != nil {
		t.Fatalf("mvn -o test in %s: %v\n%s", dir, err, text)
	}
}
