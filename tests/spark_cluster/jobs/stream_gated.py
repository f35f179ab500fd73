"""Driver: a streaming query from stream SRC into the jetstream sink (subject sink.copy), Trigger.AvailableNow,
checkpointed, ``per`` messages per micro-batch. Micro-batches holding sequence g1 or g2 stop there until
the file gate-<g> exists in ``gates`` (after writing at-<g> there, holding the Python worker's pid): the
test kills the executor running it at one and the driver at the other."""

import os
import sys
import threading
import time

from pyspark.sql import SparkSession

url, checkpoint, gates = sys.argv[1], sys.argv[2], sys.argv[3]
g1, g2, per = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
spark = SparkSession.builder.appName("natsjs-cluster-stream").getOrCreate()


def hold(batches):
    for batch in batches:
        seqs = batch.column("seq").to_pylist()
        for g in (g1, g2):
            if g in seqs:
                yield batch.slice(0, seqs.index(g))  # written before the stop: the stop is mid-batch
                batch = batch.slice(seqs.index(g))
                seqs = seqs[seqs.index(g):]
                with open(os.path.join(gates, f"at-{g}.tmp"), "w") as f:
                    f.write(str(os.getpid()))  # the test kills the executor running this Python worker
                os.rename(os.path.join(gates, f"at-{g}.tmp"), os.path.join(gates, f"at-{g}"))
                deadline = time.monotonic() + 300
                while not os.path.exists(os.path.join(gates, f"gate-{g}")) and time.monotonic() < deadline:
                    threading.Event().wait(0.1)
        yield batch


src = (spark.readStream.format("jetstream").option("servers", url).option("stream", "SRC")
       .option("maxMessagesPerTrigger", per).option("minPartitions", 2).load())
q = (src.mapInArrow(hold, src.schema).selectExpr("'sink.copy' as subject", "data")
     .writeStream.format("jetstream").option("servers", url).option("checkpointLocation", checkpoint)
     .trigger(availableNow=True).start())
q.awaitTermination()
print('{"done": true}')
spark.stop()
