// kafkajs scenarios against a broker: `node scenarios.js <scenario> <bootstrap>` prints one JSON line.
'use strict'
const { Kafka, logLevel } = require('kafkajs')

const [scenario, bootstrap] = process.argv.slice(2)
// KAFKAJS_SASL='{"mechanism":"plain","username":"u","password":"p"}' connects through a SASL listener
const sasl = process.env.KAFKAJS_SASL ? JSON.parse(process.env.KAFKAJS_SASL) : undefined
// KAFKAJS_SSL='{"ca":"ca.pem","cert":"client.pem","key":"client.key"}' connects through TLS (PEM files)
const tlsFiles = process.env.KAFKAJS_SSL ? JSON.parse(process.env.KAFKAJS_SSL) : undefined
const ssl = tlsFiles && Object.fromEntries(Object.entries(tlsFiles).map(([k, f]) => [k, require('fs').readFileSync(f, 'utf-8')]))
const kafka = new Kafka({ clientId: 'kafkajs-scenarios', brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 8 }, sasl, ssl })
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function until (predicate, ms, what) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await predicate()) return
    await sleep(50)
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`)
}

function member (groupId, topic, seen) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 300, rebalanceTimeout: 10000 })
  const state = { consumer, assignment: [] }
  consumer.on(consumer.events.GROUP_JOIN, (e) => { state.assignment = (e.payload.memberAssignment[topic] || []).slice().sort() })
  return consumer.connect()
    .then(() => consumer.subscribe({ topic, fromBeginning: true }))
    .then(() => consumer.run({ eachMessage: async ({ message }) => { if (seen) seen.push(message.value.toString()) } }))
    .then(() => state)
}

const covered = (members, n) => {
  const all = members.flatMap((m) => m.assignment)
  return members.every((m) => m.assignment.length > 0) && all.length === n && new Set(all).size === n
}

async function createTopic (admin, topic, partitions) {
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true })
}

// `node scenarios.js member <bootstrap> <topic> <group>`: one long-lived member printing its assignment
async function runMember (topic, groupId) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 3000, heartbeatInterval: 200, rebalanceTimeout: 10000 })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    console.log(JSON.stringify({ assigned: (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b) }))
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({ eachMessage: async () => {} })
  process.on('SIGTERM', async () => { await consumer.disconnect(); process.exit(0) })
  await sleep(120000)
  await consumer.disconnect()
  return {}
}

const scenarios = {
  async connect () {
    const admin = kafka.admin()
    await admin.connect()
    const topics = await admin.listTopics()
    await admin.disconnect()
    return { topics }
  },
  async create () {
    const admin = kafka.admin()
    await admin.connect()
    await createTopic(admin, 'js-six', 6)
    const meta = await admin.fetchTopicMetadata({ topics: ['js-six'] })
    await admin.disconnect()
    return { partitions: meta.topics[0].partitions.length }
  },
  async group () {
    const admin = kafka.admin()
    await admin.connect()
    await createTopic(admin, 'js-group', 6)
    const members = await Promise.all([0, 1, 2].map(() => member('js-g', 'js-group')))
    await until(() => covered(members, 6), 30000, 'three disjoint assignments covering 6 partitions')
    const before = members.map((m) => m.assignment)
    await members[0].consumer.disconnect() // LeaveGroup
    const rest = members.slice(1)
    await until(() => covered(rest, 6), 30000, 'the remaining two to take over all partitions')
    const after = rest.map((m) => m.assignment)
    await Promise.all(rest.map((m) => m.consumer.disconnect()))
    await admin.disconnect()
    return { before, after }
  },
  async resume () {
    const admin = kafka.admin()
    await admin.connect()
    await createTopic(admin, 'js-resume', 3)
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({ topic: 'js-resume', messages: Array.from({ length: 30 }, (_, i) => ({ value: `m${i}` })) })
    const seen = []
    const first = await member('js-r', 'js-resume', seen)
    await until(() => seen.length >= 30, 30000, '30 messages')
    await first.consumer.disconnect() // commits what it processed, leaves
    await producer.send({ topic: 'js-resume', messages: [{ value: 'later' }] })
    const again = []
    const second = await member('js-r', 'js-resume', again)
    await until(() => again.length >= 1, 30000, 'the message produced after the first consumer left')
    await sleep(300)
    await second.consumer.disconnect()
    await producer.disconnect()
    await admin.disconnect()
    return { first: seen.length, again }
  },
  async admin () {
    const admin = kafka.admin()
    await admin.connect()
    await createTopic(admin, 'js-admin', 2)
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({ topic: 'js-admin', messages: Array.from({ length: 10 }, (_, i) => ({ value: `a${i}`, partition: i % 2 })) })
    const seen = []
    const m = await member('js-a', 'js-admin', seen)
    await until(() => seen.length >= 10 && m.assignment.length === 2, 30000, 'the member to read 10 messages')
    const listed = (await admin.listGroups()).groups.map((g) => g.groupId)
    const described = (await admin.describeGroups(['js-a'])).groups[0]
    let nonEmpty = null
    try { await admin.deleteGroups(['js-a']) } catch (e) { nonEmpty = e.groups ? e.groups.map((g) => g.error && g.error.type) : e.type || String(e) }
    await m.consumer.disconnect()
    await until(async () => (await admin.describeGroups(['js-a'])).groups[0].state === 'Empty', 15000, 'the group to be empty')
    const offsets = await admin.fetchOffsets({ groupId: 'js-a', topics: ['js-admin'] })
    await admin.resetOffsets({ groupId: 'js-a', topic: 'js-admin', earliest: true })
    const reset = await admin.fetchOffsets({ groupId: 'js-a', topics: ['js-admin'] })
    await admin.deleteGroups(['js-a'])
    const afterDelete = (await admin.listGroups()).groups.map((g) => g.groupId)
    await producer.disconnect()
    await admin.disconnect()
    return {
      listed: listed.includes('js-a'),
      state: described.state,
      members: described.members.length,
      protocol: described.protocol,
      nonEmpty,
      offsets: offsets[0].partitions.map((p) => Number(p.offset)).sort(),
      reset: reset[0].partitions.map((p) => Number(p.offset)).sort(),
      deleted: !afterDelete.includes('js-a')
    }
  },
  async transactions () {
    // abort one transaction, commit one with the group's offsets in it; read back READ_COMMITTED
    const admin = kafka.admin()
    await admin.connect()
    await createTopic(admin, 'js-tx', 1)
    const producer = kafka.producer({ transactionalId: 'js-tx-producer', maxInFlightRequests: 1, idempotent: true })
    await producer.connect()
    const aborted = await producer.transaction()
    await aborted.send({ topic: 'js-tx', messages: [{ value: 'aborted' }] })
    await aborted.abort()
    const committed = await producer.transaction()
    await committed.send({ topic: 'js-tx', messages: [{ value: 'committed-1' }, { value: 'committed-2' }] })
    await committed.sendOffsets({ consumerGroupId: 'js-tx-group', topics: [{ topic: 'js-tx', partitions: [{ partition: 0, offset: '5' }] }] })
    await committed.commit()
    const seen = []
    const consumer = kafka.consumer({ groupId: 'js-tx-reader', readUncommitted: false })
    await consumer.connect()
    await consumer.subscribe({ topic: 'js-tx', fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()) } })
    await until(() => seen.length >= 2, 30000, 'the committed messages')
    await sleep(300)
    await consumer.disconnect()
    const offsets = await admin.fetchOffsets({ groupId: 'js-tx-group', topics: ['js-tx'] })
    await producer.disconnect()
    await admin.disconnect()
    return { seen, groupOffset: Number(offsets[0].partitions[0].offset) }
  },
  async quotas () {
    // produce 40 records of 3,000 bytes one by one, then read them all, under byte-rate quotas the
    // test set for this client id: the time it took is the broker's throttling
    const admin = kafka.admin()
    await admin.connect()
    await createTopic(admin, 'js-quota', 1)
    await admin.disconnect()
    const producer = kafka.producer()
    await producer.connect()
    const started = Date.now()
    for (let i = 0; i < 40; i++) {
      await producer.send({ topic: 'js-quota', messages: [{ value: Buffer.alloc(3000, i) }] })
    }
    const producedMs = Date.now() - started
    await producer.disconnect()
    const seen = []
    const consumer = kafka.consumer({ groupId: 'js-quota-reader' })
    await consumer.connect()
    await consumer.subscribe({ topic: 'js-quota', fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value[0]) } })
    await until(() => seen.length >= 40, 30000, 'every record')
    await consumer.disconnect()
    return { producedMs, seen }
  }
}

const running = scenario === 'member' ? runMember(process.argv[4], process.argv[5]) : scenarios[scenario]()
running
  .then((result) => { console.log(JSON.stringify({ ok: true, result })); process.exit(0) })
  .catch((err) => { console.log(JSON.stringify({ ok: false, error: String(err && err.stack || err) })); process.exit(1) })
