// The nats.go peer of the benchmarks: one scenario per run, one JSON line out.
//
//	go run main.go MODE URL ARGS...
//
// Modes (each the same work the Python side does in benchmarks/compare.py):
//
//	respond URL                     echo every request on bench.req until stdin closes
//	pub URL N SIZE                  publish N messages, flush; {"rate": msg/s}
//	pubsub URL N SIZE               publisher and subscriber connections; {"rate": msg/s}
//	request URL N                   N sequential requests; {"lat": [seconds...]}
//	requestlocal URL N              the same, answered by a subscription on the same connection
//	jspub URL SUBJECT N             PublishAsync, 4000 in flight; {"rate": msg/s}
//	consume URL STREAM SUBJECT N ACK  durable pull consumer, Fetch batches; {"rate": msg/s}
//	ordered URL STREAM SUBJECT N    ordered consumer with a callback; {"rate": msg/s}
//	kvget URL BUCKET N              sequential gets of keys k0..k99; {"rate": ops/s}
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	must(err)
	return n
}

func out(key string, value interface{}) {
	b, err := json.Marshal(map[string]interface{}{key: value})
	must(err)
	fmt.Println(string(b))
}

func connect(url string) *nats.Conn {
	nc, err := nats.Connect(url, nats.Name("bench-go"))
	must(err)
	return nc
}

func rate(n int, start time.Time) float64 {
	return float64(n) / time.Since(start).Seconds()
}

// requestLatencies: 50 requests to warm up, then n timed ones (seconds each).
func requestLatencies(nc *nats.Conn, subject string, n int) []float64 {
	for i := 0; i < 50; i++ {
		_, err := nc.Request(subject, []byte("ping"), 5*time.Second)
		must(err)
	}
	lat := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		_, err := nc.Request(subject, []byte("ping"), 5*time.Second)
		must(err)
		lat = append(lat, time.Since(t0).Seconds())
	}
	return lat
}

func main() {
	mode, url, args := os.Args[1], os.Args[2], os.Args[3:]
	switch mode {
	case "respond":
		nc := connect(url)
		_, err := nc.Subscribe("bench.req", func(m *nats.Msg) { _ = m.Respond(m.Data) })
		must(err)
		must(nc.Flush())
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		nc.Close()

	case "pub":
		n, payload := atoi(args[0]), make([]byte, atoi(args[1]))
		nc := connect(url)
		start := time.Now()
		for i := 0; i < n; i++ {
			must(nc.Publish("bench.pub", payload))
		}
		must(nc.FlushTimeout(60 * time.Second))
		out("rate", rate(n, start))
		nc.Close()

	case "pubsub":
		n, payload := atoi(args[0]), make([]byte, atoi(args[1]))
		subNc, pubNc := connect(url), connect(url)
		done := make(chan time.Time, 1)
		count := 0
		sub, err := subNc.Subscribe("bench.ps", func(*nats.Msg) {
			count++
			if count == n {
				done <- time.Now()
			}
		})
		must(err)
		must(sub.SetPendingLimits(-1, -1))
		must(subNc.Flush())
		start := time.Now()
		for i := 0; i < n; i++ {
			must(pubNc.Publish("bench.ps", payload))
		}
		must(pubNc.FlushTimeout(60 * time.Second))
		end := <-done
		out("rate", float64(n)/end.Sub(start).Seconds())
		subNc.Close()
		pubNc.Close()

	case "request":
		nc := connect(url)
		out("lat", requestLatencies(nc, "bench.req", atoi(args[0])))
		nc.Close()

	case "requestlocal":
		nc := connect(url)
		_, err := nc.Subscribe("bench.local", func(m *nats.Msg) { _ = m.Respond(m.Data) })
		must(err)
		must(nc.Flush())
		out("lat", requestLatencies(nc, "bench.local", atoi(args[0])))
		nc.Close()

	case "jspub":
		subject, n := args[0], atoi(args[1])
		payload := make([]byte, 128)
		nc := connect(url)
		js, err := nc.JetStream(nats.PublishAsyncMaxPending(4000))
		must(err)
		start := time.Now()
		for i := 0; i < n; i++ {
			_, err := js.PublishAsync(subject, payload)
			must(err)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(120 * time.Second):
			must(fmt.Errorf("publish acks timed out"))
		}
		out("rate", rate(n, start))
		nc.Close()

	case "consume":
		stream, subject, n, ack := args[0], args[1], atoi(args[2]), args[3] == "1"
		nc := connect(url)
		js, err := nc.JetStream()
		must(err)
		opts := []nats.SubOpt{nats.BindStream(stream)}
		if ack {
			opts = append(opts, nats.AckExplicit())
		} else {
			opts = append(opts, nats.AckNone())
		}
		sub, err := js.PullSubscribe(subject, "bench", opts...)
		must(err)
		start := time.Now()
		count := 0
		for count < n {
			msgs, err := sub.Fetch(1000, nats.MaxWait(10*time.Second))
			must(err)
			for _, m := range msgs {
				if ack {
					must(m.Ack())
				}
				count++
			}
		}
		must(nc.FlushTimeout(30 * time.Second))
		out("rate", rate(n, start))
		nc.Close()

	case "ordered":
		subject, n := args[1], atoi(args[2])
		nc := connect(url)
		js, err := nc.JetStream()
		must(err)
		done := make(chan struct{})
		count := 0
		start := time.Now()
		sub, err := js.Subscribe(subject, func(*nats.Msg) {
			count++
			if count == n {
				close(done)
			}
		}, nats.OrderedConsumer())
		must(err)
		select {
		case <-done:
		case <-time.After(120 * time.Second):
			must(fmt.Errorf("ordered consumer timed out at %d", count))
		}
		out("rate", rate(n, start))
		_ = sub.Unsubscribe()
		nc.Close()

	case "kvget":
		bucket, n := args[0], atoi(args[1])
		nc := connect(url)
		js, err := nc.JetStream()
		must(err)
		kv, err := js.KeyValue(bucket)
		must(err)
		start := time.Now()
		for i := 0; i < n; i++ {
			_, err := kv.Get("k" + strconv.Itoa(i%100))
			must(err)
		}
		out("rate", rate(n, start))
		nc.Close()

	default:
		must(fmt.Errorf("unknown mode %q", mode))
	}
}
