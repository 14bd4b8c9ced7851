// A service, in TypeScript, that starts a capflow plan with Temporal's own
// client (@temporalio/client) and prints the run's result. It knows
// capflow only through its published contract: workflow type
// `PlanWorkflow`, the `progress` query, and the JSON schemas of the input
// and result in the repository's schemas/ folder (docs/workflow.md).
//
//   npm ci && npm run build
//   node dist/start-plan.js PLAN.yaml [--input name=value]... [--id WORKFLOW_ID]
//
// Environment: TEMPORAL_ADDRESS (localhost:7233), TEMPORAL_NAMESPACE
// (default), CAPFLOW_TASK_QUEUE (capflow), CAPFLOW_SCHEMAS (the
// repository's schemas/ folder). Exit codes follow capflow's CLI: 0
// passed, 1 failed, 2 invalid input, 3 gaps, 4 blocked by policy, 5
// cancelled.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import Ajv2020 from 'ajv/dist/2020';
import YAML from 'yaml';

/** The workflow input (schemas/workflow-input.schema.json). */
interface WorkflowInput {
  plan?: unknown;
  plan_file?: string;
  request?: string;
  inputs?: Record<string, unknown>;
}

/** The parts of the result (schemas/workflow-result.schema.json) this service reads. */
interface WorkflowResult {
  status: string;
  message?: string;
  workflow_id: string;
  steps: { id: string; status: string; tool?: string; attempts?: number }[];
  outputs?: Record<string, unknown>;
  report?: { json?: string; markdown?: string };
  duration_ms?: number;
}

const exitCodes: Record<string, number> = {
  passed: 0, failed: 1, invalid: 2, 'partial-complete': 3, blocked_by_policy: 4, cancelled: 5,
};

function usage(msg: string): never {
  process.stderr.write(`${msg}\nusage: start-plan PLAN.yaml [--input name=value]... [--id WORKFLOW_ID]\n`);
  process.exit(2);
}

function parseArgs(argv: string[]): { planPath: string; inputs: Record<string, unknown>; id?: string } {
  const inputs: Record<string, unknown> = {};
  let planPath = '';
  let id: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--input' || a === '--id') {
      const v = argv[++i];
      if (v === undefined) usage(`${a} needs a value`);
      if (a === '--id') {
        id = v;
        continue;
      }
      const eq = v.indexOf('=');
      if (eq < 1) usage(`--input ${v}: want name=value`);
      const raw = v.slice(eq + 1);
      // Numbers, booleans and JSON values as such; anything else a string.
      try {
        inputs[v.slice(0, eq)] = JSON.parse(raw);
      } catch {
        inputs[v.slice(0, eq)] = raw;
      }
    } else if (!planPath) {
      planPath = a;
    } else {
      usage(`unexpected argument ${a}`);
    }
  }
  if (!planPath) usage('no plan given');
  return { planPath, inputs, id };
}

function loadSchema(dir: string, name: string) {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  return ajv.compile(JSON.parse(readFileSync(path.join(dir, name), 'utf8')));
}

async function main(): Promise<number> {
  const { planPath, inputs, id } = parseArgs(process.argv.slice(2));
  const schemas = process.env.CAPFLOW_SCHEMAS ?? path.resolve(__dirname, '../../../schemas');
  const validInput = loadSchema(schemas, 'workflow-input.schema.json');
  const validResult = loadSchema(schemas, 'workflow-result.schema.json');

  let plan: unknown;
  try {
    plan = YAML.parse(readFileSync(planPath, 'utf8'));
  } catch (e) {
    process.stderr.write(`${planPath}: ${(e as Error).message}\n`);
    return 2;
  }
  const input: WorkflowInput = { plan, inputs };
  if (!validInput(input)) {
    process.stderr.write(`the workflow input does not match workflow-input.schema.json: ${JSON.stringify(validInput.errors)}\n`);
    return 2;
  }

  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? 'localhost:7233' });
  try {
    const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
    const name = typeof plan === 'object' && plan && 'name' in plan ? String((plan as { name: unknown }).name) : 'plan';
    const handle = await client.workflow.start('PlanWorkflow', {
      taskQueue: process.env.CAPFLOW_TASK_QUEUE ?? 'capflow',
      workflowId: id ?? `ts-${name}-${randomBytes(4).toString('hex')}`,
      args: [input],
    });
    process.stderr.write(`started ${handle.workflowId}\n`);

    // Progress while it runs: the workflow's `progress` query.
    const seen = new Map<string, string>();
    const timer = setInterval(async () => {
      try {
        const p = await handle.query<WorkflowResult>('progress');
        for (const s of p.steps ?? []) {
          if (seen.get(s.id) !== s.status) {
            seen.set(s.id, s.status);
            process.stderr.write(`  ${s.id}: ${s.status}\n`);
          }
        }
      } catch {
        // not resolved yet, or just ended
      }
    }, 300);
    let result: WorkflowResult;
    try {
      result = await handle.result();
    } finally {
      clearInterval(timer);
    }

    if (!validResult(result)) {
      process.stderr.write(`the result does not match workflow-result.schema.json: ${JSON.stringify(validResult.errors)}\n`);
      return 1;
    }
    process.stdout.write(JSON.stringify(result) + '\n');
    process.stderr.write(`${result.workflow_id}: ${result.status}: ${result.message ?? ''}\n`);
    return exitCodes[result.status] ?? 1;
  } finally {
    await connection.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`start-plan: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
