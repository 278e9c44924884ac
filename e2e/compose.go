package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// LoadCompose loads a compose file (the repository's docker-compose.yml in
// the compose tests) with the given profiles, as `docker compose` would.
func LoadCompose(t testing.TB, path string, profiles ...string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: data}},
		Environment: types.Mapping{},
	}, loader.WithProfiles(profiles), func(o *loader.Options) { o.SetProjectName("heureka", true) })
	if err != nil {
		t.Fatalf("load %s with profiles %v: %v", path, profiles, err)
	}
	return p
}

// DockerfileEnv reads the ENV instructions (KEY=value form, line
// continuations allowed) of a Dockerfile's final stage: the environment
// every container of the image starts with.
func DockerfileEnv(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	cur := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		fields := strings.Fields(cur + line)
		cur = ""
		if len(fields) == 0 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			env = map[string]string{} // a new stage starts with a clean environment
		case "ENV":
			for _, kv := range fields[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("%s: ENV %q: use KEY=value", path, kv)
				}
				env[k] = strings.Trim(v, `"`)
			}
		}
	}
	return env
}
