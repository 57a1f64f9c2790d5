'use strict';
/*
 * Scenarios of the official RocketMQ 5 Node.js client (rocketmq-client-nodejs, unmodified, installed from the
 * lock file beside this script by tests/grpc/node.py): never loaded by pytest, run as a script.
 *
 *     node scenarios.js <scenario> '<json arguments>'
 *
 * The same scenarios, arguments and output as official_client.py (the Python client's), so one test reads either:
 * each prints one JSON object on its last stdout line; timestamps are epoch milliseconds. Every wait is bounded;
 * the caller kills the process if it outlives its own timeout.
 */

const {
  Producer, SimpleConsumer, PushConsumer, ConsumeResult, FilterExpression,
} = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function options(args) {
  const opts = { endpoints: args.endpoints, namespace: '', requestTimeout: (args.request_timeout || 3) * 1000 };
  if (args.ak) opts.sessionCredentials = { accessKey: args.ak, accessSecret: args.sk || '' };
  if (args.tls) opts.sslEnabled = true;
  return opts;
}

function build(args, i) {
  const text = (args.body_prefix || 'body-') + i;
  const msg = { topic: args.topic, body: Buffer.from(text.repeat(args.body_repeat || 1)) };
  if (args.tag) msg.tag = args.tag;
  if (args.keys) msg.keys = [`${args.keys}-${i}`];
  const props = Object.entries(args.properties || {});
  if (props.length) msg.properties = new Map(props);
  if (args.kind === 'fifo') msg.messageGroup = `group-${i % (args.groups || 1)}`;
  if (args.kind === 'delay') msg.delay = args.delay_s * 1000;
  return msg;
}

function record(view) {
  return {
    message_id: view.messageId, topic: view.topic, body: view.body.toString(), tag: view.tag || null,
    keys: [...view.keys].sort(), properties: Object.fromEntries(view.properties || []),
    message_group: view.messageGroup || null, born_ms: view.bornTimestamp ? view.bornTimestamp.getTime() : null,
    born_host: view.bornHost, attempt: view.deliveryAttempt, received_ms: Date.now(),
    delivery_ms: view.deliveryTimestamp ? view.deliveryTimestamp.getTime() : null,
  };
}

function failure(err) {
  return String(err && err.stack ? `${err.name}: ${err.message}` : err).slice(0, 300);
}

async function produce(args) {
  const checked = [];
  const checker = { async check(view) { checked.push(view.messageId); return TransactionResolution.COMMIT; } };
  const producer = new Producer({ ...options(args), topics: [args.topic],
    checker: args.kind === 'tx' ? checker : undefined });
  const sent = [];
  const errors = [];
  const recalled = [];
  try {
    await producer.startup(); // fetches the topic's route: a refusal is this client's first error
  } catch (err) {
    errors.push({ i: 0, error: `startup: ${failure(err)}` });
    return { sent, errors, checked, recalled };
  }
  try {
    const deadline = Date.now() + (args.duration_s || 0) * 1000;
    for (let i = 0; i < (args.count || 0) || Date.now() < deadline; i++) {
      const sentMs = Date.now();
      try {
        let receipt;
        if (args.kind === 'tx') {
          const tx = producer.beginTransaction();
          receipt = await producer.send(build(args, i), tx);
          if (args.commit !== false) await tx.commit();
        } else {
          receipt = await producer.send(build(args, i));
        }
        sent.push({ i, message_id: receipt.messageId, transaction_id: receipt.transactionId,
          offset: Number(receipt.offset), sent_ms: sentMs });
        if (args.recall_every && i % args.recall_every === 0) {
          recalled.push((await producer.recallMessage(args.topic, receipt.recallHandle)).messageId);
        }
      } catch (err) { // recorded: the caller asserts on what was and was not acknowledged
        errors.push({ i, error: failure(err) });
      }
      if (args.pause_s) await sleep(args.pause_s * 1000);
    }
    const checkDeadline = Date.now() + (args.wait_check_s || 0) * 1000;
    while (checked.length < sent.length && Date.now() < checkDeadline) await sleep(100);
    await sleep((args.linger_s || 0) * 1000);
  } finally {
    await producer.shutdown();
  }
  return { sent, errors, checked, recalled };
}

async function simple(args) {
  const consumer = new SimpleConsumer({ ...options(args), consumerGroup: args.group,
    subscriptions: new Map([[args.topic, new FilterExpression(args.filter || '*')]]),
    awaitDuration: (args.await_s || 5) * 1000 });
  await consumer.startup();
  const got = [];
  const changed = {};
  const errors = [];
  const mode = args.mode || 'ack';
  let left = null;
  try {
    const deadline = Date.now() + args.timeout_s * 1000;
    while (Date.now() < deadline && got.filter((g) => g.acked).length < args.want) {
      const views = await consumer.receive(args.batch || 16, (args.invisible_s || 15) * 1000);
      for (const view of views) {
        const rec = { ...record(view), acked: false };
        got.push(rec);
        if (mode === 'leave-one' && left === null) {
          left = view.messageId;
          continue;
        }
        if (mode === 'change' && !(view.messageId in changed)) {
          await consumer.changeInvisibleDuration(view, args.change_s * 1000);
          changed[view.messageId] = Date.now();
          continue;
        }
        try {
          await consumer.ack(view);
          rec.acked = true;
        } catch (err) {
          errors.push(failure(err));
        }
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return { received: got, changed, errors };
}

async function push(args) {
  const got = [];
  let failFirst = args.fail_first || 0;
  let holdFirst = args.hold_first_s || 0;
  const consumer = new PushConsumer({ ...options(args), consumerGroup: args.group,
    subscriptions: new Map([[args.topic, new FilterExpression(args.filter || '*')]]),
    messageListener: {
      async consume(view) {
        got.push(record(view));
        if (failFirst > 0) {
          failFirst -= 1;
          return ConsumeResult.FAILURE;
        }
        const hold = holdFirst;
        holdFirst = 0;
        await sleep(hold * 1000); // a slow listener: the message stays held (its handle renewed) meanwhile
        return ConsumeResult.SUCCESS;
      },
    } });
  await consumer.startup();
  let fifo = false;
  try {
    const deadline = Date.now() + args.timeout_s * 1000;
    let lastCount = 0;
    let lastChange = Date.now();
    while (Date.now() < deadline) {
      await sleep(100);
      if (got.length !== lastCount) {
        lastCount = got.length;
        lastChange = Date.now();
      }
      if (got.length >= args.want && Date.now() - lastChange >= (args.quiet_s || 2) * 1000) break;
    }
    fifo = Boolean(consumer.getPushConsumerSettings().isFifo());
  } finally {
    await consumer.shutdown();
  }
  return { received: got, fifo };
}

const SCENARIOS = { produce, simple, push };

SCENARIOS[process.argv[2]](JSON.parse(process.argv[3])).then((result) => {
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
}, (err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`, () => process.exit(1));
});
