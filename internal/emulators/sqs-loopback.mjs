// Starts the fauxqs SQS emulator bound to 127.0.0.1 only.
// fauxqs's own CLI binds 0.0.0.0, so this uses its buildApp API instead.
// Usage: node sqs-loopback.mjs <port>   (0 picks a free port)
import { buildApp } from "fauxqs";

const port = Number(process.argv[2] ?? 0);
// Queue URLs take the request host (127.0.0.1:<port>), so no host option is set.
const app = buildApp({ logger: false });
const address = await app.listen({ host: "127.0.0.1", port });
console.log(`LISTENING ${address}`);

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, async () => {
    await app.close();
    process.exit(0);
  });
}
