// Command intruder tries to change a heureka cluster it is not a member
// of, through every door of the control plane (intruder.Control, without
// a secret and with a wrong one, and a Raft AppendEntries with a higher
// term to every node's Raft port), and prints one JSON line per attempt
// (intruder.Result). It exits 0 when every attempt was refused, 1 when
// one was not, 2 when it could not run. The container tests run it in a
// container of heureka's image on the compose network (e2e/compose).
//
//	intruder --http heureka1:8761,heureka2:8761 --raft heureka1:8762,heureka2:8762 --victim n3 --snapshot old.snap
//
// It imports e2e/intruder, internal/testkit/launch and opapi.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/heureka-registry/heureka/e2e/intruder"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/opapi"
)

func main() {
	httpAddrs := flag.String("http", "", "comma-separated HTTP addresses (host:port) of the nodes")
	raftAddrs := flag.String("raft", "", "comma-separated Raft addresses of the same nodes, in the same order")
	victim := flag.String("victim", "", "id of the member to remove")
	snapFile := flag.String("snapshot", "", "an old snapshot to restore")
	flag.Parse()
	accepted, err := run(strings.Split(*httpAddrs, ","), strings.Split(*raftAddrs, ","), *victim, *snapFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "intruder: %v\n", err)
		os.Exit(2)
	}
	if accepted > 0 {
		fmt.Fprintf(os.Stderr, "intruder: %d attempts were not refused\n", accepted)
		os.Exit(1)
	}
}

// run sends every attack to every node and returns how many were not refused.
func run(httpAddrs, raftAddrs []string, victim, snapFile string) (int, error) {
	if len(httpAddrs) != len(raftAddrs) || httpAddrs[0] == "" || victim == "" || snapFile == "" {
		return 0, errors.New("give --http and --raft (as many of each), --victim and --snapshot")
	}
	snap, err := os.ReadFile(snapFile)
	if err != nil {
		return 0, fmt.Errorf("read the snapshot: %w", err)
	}
	attacks, err := intruder.Control(victim, snap)
	if err != nil {
		return 0, err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	out := json.NewEncoder(os.Stdout)
	accepted := 0
	emit := func(r intruder.Result) error {
		if !r.Refused {
			accepted++
		}
		return out.Encode(r)
	}
	for i, addr := range httpAddrs {
		base := "http://" + addr
		for _, a := range attacks {
			for _, extra := range [][]string{nil, intruder.WrongSecret} {
				r := intruder.Result{Node: addr, Attack: a.Name, Secret: "none"}
				if extra != nil {
					r.Secret = "wrong"
				}
				code, body, err := a.Send(client, base, extra...)
				r.Code, r.Refused, r.Detail = code, err == nil && code == intruder.RefusedStatus(extra), strings.TrimSpace(string(body))
				if err != nil {
					r.Detail = err.Error()
				}
				if err := emit(r); err != nil {
					return accepted, err
				}
			}
		}
		// The node's term and commit index (GET /v1/status is open), for an
		// append that a node without the secret check would take.
		var st opapi.NodeStatus
		code, body, _, err := launch.Send(context.Background(), client, "GET", base+"/v1/status", nil, nil)
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(body, &st)
		} else if err == nil {
			err = fmt.Errorf("GET /v1/status: %d %s", code, body)
		}
		if err != nil {
			return accepted, fmt.Errorf("%s: %w", addr, err)
		}
		r := intruder.Result{Node: raftAddrs[i], Attack: "raft append entries", Secret: "none"}
		resp, err := intruder.RaftAppend(intruder.DialTCP, raftAddrs[i], st.Term, st.CommitIndex)
		if err != nil {
			r.Refused, r.Detail = true, err.Error()
		} else {
			r.Detail = fmt.Sprintf("answered: term %d (the node's was %d), success %v", resp.Term, st.Term, resp.Success)
		}
		if err := emit(r); err != nil {
			return accepted, err
		}
	}
	return accepted, nil
}
