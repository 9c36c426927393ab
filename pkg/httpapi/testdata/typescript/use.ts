// Compiled with tsc --strict against the types openapi-typescript generates
// from openapi.json (TestTypeScriptTypesCompile): what a TypeScript user of
// the API writes must type-check as the server accepts and answers it.
import type { components } from "./api";

type Step = components["schemas"]["Step"];
type FlowCreate = components["schemas"]["FlowCreate"];
type Flow = components["schemas"]["Flow"];
type Run = components["schemas"]["Run"];

// Steps carry only their own fields: no FOR_EACH concurrency on a FILTER.
const steps: Step[] = [
  { name: "signups", type: "FILTER", condition: 'trigger.body.event == "signup"' },
  { name: "lead", type: "SET", values: { email: "{{ trigger.body.email }}", seats: 5 } },
  {
    name: "lines", type: "FOR_EACH", items: "trigger.body.items",
    steps: [{ name: "line", type: "SET", values: { sku: "{{ item.sku }}" } }],
  },
  { name: "remember", type: "STORE", set: { last: "{{ trigger.body.email }}" } },
  { name: "later", type: "WAIT", duration: "10m" },
];
export const create: FlowCreate = { name: "Typed", engine: "FLOW_BUILDER", steps };

// Responses: masked secrets are strings; stats may be null before a first run.
export function describe(f: Flow): string {
  const secret: string | undefined = f.trigger?.webhook?.authentication?.value;
  const rate: number | null = f.successRate;
  return `${f.name} ${secret ?? "-"} ${rate ?? "—"}`;
}

export function outputs(r: Run): unknown[] {
  return r.steps.map((s) => s.output);
}
