package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/bench"
)

// limitServer runs bench.LimitHandler as its own process, so benchmarks
// compare heureka with the cheapest server of the same bytes under the same
// conditions (its own process, same HTTP stack).
func limitServer(args []string) int {
	fs := newFlagSet("limit-server")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	bodyFile := fs.String("body-file", "", "file whose bytes every response carries")
	contentType := fs.String("content-type", "application/json", "Content-Type of the answers")
	encoding := fs.String("content-encoding", "", "Content-Encoding of the answers (e.g. gzip when the file is gzipped)")
	if code, ok := parseCommand(fs, "--body-file FILE [flags]", args, os.Stdout, os.Stderr); !ok {
		return code
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka limit-server: %v\n", err)
		return 2
	}
	h := http.Header{"Content-Type": {*contentType}}
	if *encoding != "" {
		h.Set("Content-Encoding", *encoding)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka limit-server: %v\n", err)
		return 1
	}
	fmt.Println(ln.Addr().String()) // the caller reads the chosen port from here
	srv := &http.Server{Handler: bench.LimitHandler(body, h), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "heureka limit-server: %v\n", err)
		return 1
	}
	return 0
}
