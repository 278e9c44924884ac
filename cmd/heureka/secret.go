package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

const secretUsage = `Usage: heureka secret init [--owner UID:GID] FILE

Writes a random cluster secret (32 bytes, base64) to FILE, readable by its
owner only, for --cluster-secret-file on every node. A FILE that already
holds a secret is left as it is, so the command can run before every start
(the compose file's one-shot service does). --owner gives a new FILE to
that user and group (run as root: the nodes' user then reads it).
`

// secretCmd is `heureka secret init FILE`.
func secretCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, secretUsage)
		return 0
	}
	if len(args) < 2 || args[0] != "init" {
		fmt.Fprint(stderr, secretUsage)
		return 2
	}
	fs := newFlagSet("secret init")
	owner := fs.String("owner", "", "UID:GID to give a new file")
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, secretUsage)
		return 0
	} else if err != nil || fs.NArg() != 1 {
		fmt.Fprint(stderr, secretUsage)
		return 2
	}
	uid, gid := -1, -1
	if *owner != "" {
		u, g, ok := strings.Cut(*owner, ":")
		var err1, err2 error
		uid, err1 = strconv.Atoi(u)
		gid, err2 = strconv.Atoi(g)
		if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			fmt.Fprintf(stderr, "heureka secret init: --owner %q: want UID:GID\n", *owner)
			return 2
		}
	}
	file := fs.Arg(0)
	created, err := initSecretFile(file)
	if err == nil && created && uid >= 0 {
		if err = os.Chown(file, uid, gid); err != nil {
			os.Remove(file)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "heureka secret init: %v\n", err)
		return 1
	}
	if created {
		fmt.Fprintf(stdout, "wrote a new cluster secret to %s\n", file)
		return 0
	}
	fmt.Fprintf(stdout, "%s already holds a cluster secret; left as it is\n", file)
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		// Whoever can read the secret can call every node's internal
		// endpoints and join its Raft cluster.
		fmt.Fprintf(stderr, "heureka secret init: warning: %s is readable by others than its owner (mode %04o); chmod 600 it\n",
			file, st.Mode().Perm())
	}
	return 0
}

// initSecretFile creates file with a fresh random secret, or checks that
// the one it holds would be accepted by serve; it reports whether it
// created the file.
func initSecretFile(file string) (bool, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return false, err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if _, err := readClusterSecret("", file); err != nil {
			return false, fmt.Errorf("%s exists but does not hold a usable secret: %w", file, err)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = f.WriteString(base64.RawURLEncoding.EncodeToString(raw) + "\n")
	if err == nil {
		err = f.Sync() // a crash must not leave an empty file that init then refuses
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return false, err
	}
	return true, nil
}
