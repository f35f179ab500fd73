// The nats.js peer of the benchmarks: one scenario per run, one JSON line out.
//
//   node bench.mjs MODE URL ARGS...
//
// Run from a folder where @nats-io/transport-node, @nats-io/jetstream and
// @nats-io/kv are installed (benchmarks/compare.py does that). The modes and
// their arguments are the same as the Go peer's (benchmarks/peers/go/main.go).
import { connect } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";

const [mode, url, ...args] = process.argv.slice(2);
const now = () => performance.now() / 1000;
const out = (key, value) => console.log(JSON.stringify({ [key]: value }));
const conn = () => connect({ servers: url, name: "bench-js" });

// 50 requests to warm up, then n timed ones (seconds each).
async function requestLatencies(nc, subject, n) {
  const ping = new TextEncoder().encode("ping");
  for (let i = 0; i < 50; i++) await nc.request(subject, ping, { timeout: 5000 });
  const lat = [];
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await nc.request(subject, ping, { timeout: 5000 });
    lat.push(now() - t0);
  }
  return lat;
}

async function main() {
  switch (mode) {
    case "respond": {
      const nc = await conn();
      nc.subscribe("bench.req", { callback: (_err, m) => m.respond(m.data) });
      await nc.flush();
      console.log("ready");
      process.stdin.resume();
      await new Promise((resolve) => process.stdin.on("end", resolve));
      await nc.close();
      break;
    }
    case "pub": {
      const n = Number(args[0]);
      const payload = new Uint8Array(Number(args[1]));
      const nc = await conn();
      const start = now();
      for (let i = 0; i < n; i++) nc.publish("bench.pub", payload);
      await nc.flush();
      out("rate", n / (now() - start));
      await nc.close();
      break;
    }
    case "pubsub": {
      const n = Number(args[0]);
      const payload = new Uint8Array(Number(args[1]));
      const subNc = await conn();
      const pubNc = await conn();
      let count = 0;
      let finish;
      const done = new Promise((resolve) => (finish = resolve));
      subNc.subscribe("bench.ps", {
        callback: () => {
          if (++count === n) finish(now());
        },
      });
      await subNc.flush();
      const start = now();
      for (let i = 0; i < n; i++) pubNc.publish("bench.ps", payload);
      await pubNc.flush();
      const end = await done;
      out("rate", n / (end - start));
      await subNc.close();
      await pubNc.close();
      break;
    }
    case "request": {
      const nc = await conn();
      out("lat", await requestLatencies(nc, "bench.req", Number(args[0])));
      await nc.close();
      break;
    }
    case "requestlocal": {
      const nc = await conn();
      nc.subscribe("bench.local", { callback: (_err, m) => m.respond(m.data) });
      await nc.flush();
      out("lat", await requestLatencies(nc, "bench.local", Number(args[0])));
      await nc.close();
      break;
    }
    case "jspub": {
      const [subject, n] = [args[0], Number(args[1])];
      const payload = new Uint8Array(128);
      const nc = await conn();
      const js = jetstream(nc);
      // A sliding window of 4000 publishes in flight, as the others do.
      const window = [];
      const start = now();
      for (let i = 0; i < n; i++) {
        window.push(js.publish(subject, payload));
        if (window.length >= 4000) await window.shift();
      }
      await Promise.all(window);
      out("rate", n / (now() - start));
      await nc.close();
      break;
    }
    case "consume": {
      const [stream, , n, ack] = [args[0], args[1], Number(args[2]), args[3] === "1"];
      const nc = await conn();
      const jsm = await jetstreamManager(nc);
      await jsm.consumers.add(stream, {
        durable_name: "bench",
        ack_policy: ack ? AckPolicy.Explicit : AckPolicy.None,
      });
      const consumer = await jetstream(nc).consumers.get(stream, "bench");
      const start = now();
      let count = 0;
      const iter = await consumer.consume({ max_messages: 1000 });
      for await (const m of iter) {
        if (ack) m.ack();
        if (++count === n) break;
      }
      await nc.flush();
      out("rate", n / (now() - start));
      await nc.close();
      break;
    }
    case "ordered": {
      const [stream, , n] = [args[0], args[1], Number(args[2])];
      const nc = await conn();
      const start = now();
      const consumer = await jetstream(nc).consumers.get(stream);
      let count = 0;
      const iter = await consumer.consume({ max_messages: 1000 });
      for await (const _m of iter) {
        if (++count === n) break;
      }
      out("rate", n / (now() - start));
      await nc.close();
      break;
    }
    case "kvget": {
      const [bucket, n] = [args[0], Number(args[1])];
      const nc = await conn();
      const kv = await new Kvm(nc).open(bucket);
      const start = now();
      for (let i = 0; i < n; i++) await kv.get(`k${i % 100}`);
      out("rate", n / (now() - start));
      await nc.close();
      break;
    }
    default:
      throw new Error(`unknown mode ${mode}`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
