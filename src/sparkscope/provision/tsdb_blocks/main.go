// Command tsdb-blocks writes one Prometheus TSDB block, as a Thanos ingester
// would have uploaded it, from series given as JSON on its standard input:
//
//	{"external_labels": {"receive_replica": "1", ...}, "source": "receive",
//	 "series": [{"labels": {"__name__": "m", ...}, "samples": [[ms, value], ...]}]}
//
// The block goes to <out>/<ULID>/ (out may be a FILESYSTEM bucket), with the
// thanos section of its meta.json (the external labels, resolution 0, the
// source) that Thanos' store gateway and compactor read. Its ULID is dated at
// the block's end, as if it had been made then: Thanos' compactor leaves
// blocks younger than its consistency delay alone.
//
// sparkscope's tests use it to have blocks spanning days (downsampling starts
// at 40 h) without waiting for them. Built by provision/go.py.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb"
)

type input struct {
	ExternalLabels map[string]string `json:"external_labels"`
	Source         string            `json:"source"`
	Series         []struct {
		Labels  map[string]string `json:"labels"`
		Samples [][2]float64      `json:"samples"`
	} `json:"series"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tsdb-blocks: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	out := flag.String("out", "", "folder the block goes into (e.g. a FILESYSTEM bucket)")
	flag.Parse()
	if *out == "" {
		fail("-out is required")
	}
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fail("reading the series from standard input: %v", err)
	}
	if in.Source == "" {
		in.Source = "receive"
	}
	mint, maxt := int64(1<<62), int64(-1<<62)
	for _, s := range in.Series {
		for _, sample := range s.Samples {
			mint, maxt = min(mint, int64(sample[0])), max(maxt, int64(sample[0]))
		}
	}
	if mint > maxt {
		fail("no samples given")
	}
	staging, err := os.MkdirTemp(*out, ".tsdb-blocks-")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(staging)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// One block over the whole range: its size is at least the range, so nothing is split.
	writer, err := tsdb.NewBlockWriter(logger, staging, maxt-mint+1)
	if err != nil {
		fail("%v", err)
	}
	app := writer.Appender(context.Background())
	for _, s := range in.Series {
		lset := labels.FromMap(s.Labels)
		samples := append([][2]float64(nil), s.Samples...)
		sort.Slice(samples, func(i, j int) bool { return samples[i][0] < samples[j][0] })
		for _, sample := range samples {
			if _, err := app.Append(0, lset, int64(sample[0]), sample[1]); err != nil {
				fail("series %v at %d: %v", s.Labels, int64(sample[0]), err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		fail("%v", err)
	}
	id, err := writer.Flush(context.Background())
	if err != nil {
		fail("%v", err)
	}
	if err := writer.Close(); err != nil {
		fail("%v", err)
	}
	newID := ulid.MustNew(uint64(maxt), rand.Reader)
	dir := filepath.Join(staging, id.String())
	if err := addThanosSection(dir, newID, in); err != nil {
		fail("%v", err)
	}
	if err := os.Rename(dir, filepath.Join(*out, newID.String())); err != nil {
		fail("%v", err)
	}
	fmt.Println(newID.String())
}

// addThanosSection rewrites meta.json: the new ULID (in its sources too) and
// Thanos' own section, with every file's size as Thanos lists them.
func addThanosSection(dir string, newID ulid.ULID, in input) error {
	path := filepath.Join(dir, "meta.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		return err
	}
	meta["ulid"] = newID.String()
	if compaction, ok := meta["compaction"].(map[string]any); ok {
		compaction["sources"] = []string{newID.String()}
	}
	var files []map[string]any
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "meta.json" {
			files = append(files, map[string]any{"rel_path": rel})
		} else {
			files = append(files, map[string]any{"rel_path": rel, "size_bytes": info.Size()})
		}
		return nil
	})
	if err != nil {
		return err
	}
	meta["thanos"] = map[string]any{
		"labels":     in.ExternalLabels,
		"downsample": map[string]any{"resolution": 0},
		"source":     in.Source,
		"files":      files,
	}
	text, err := json.MarshalIndent(meta, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(text, '\n'), 0o644)
}
