# An envelope far past what a run's history may hold: capflow must cut
# what travels and keep the whole envelope in the step folder.
import json, os, time

ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
feedback = [{"phase": "work", "level": "info", "message": "entry %d %s" % (i + 1, "y" * 40), "timestamp": ts}
            for i in range(30000)]
env = {"toolId": "loud", "exitCode": 0, "success": True, "timestamp": ts,
       "message": "LOUD-START " + "x" * (3 << 20) + " LOUD-END", "feedback": feedback, "data": {"ok": True}}
with open(os.environ["CAPFLOW_OUTPUT_PATH"], "w") as f:
    json.dump(env, f)
