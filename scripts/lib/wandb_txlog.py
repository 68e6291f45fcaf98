"""Reading a W&B run's transaction log (the run-ID.wandb file that wandb
writes beside every run, online or offline, and that `wandb sync` uploads).

wandb 0.31 ships no Python reader for it (its datastore module went when
sync moved into wandb-core), so the framing is read here: LevelDB's log
format (32 KiB blocks; records of crc32, uint16 length, type FULL, FIRST,
MIDDLE or LAST, data; github.com/google/leveldb doc/log_format.md) behind a
7-byte header (":W&B", magic 0xBEE1, version 0), where the checksum is zlib's
crc32 of the type byte and the data. Each record's data is a Record message
of wandb's own protobuf schema (wandb.proto.wandb_internal_pb2), decoded by
wandb's generated classes.

A log that ends inside a record (a run still writing, or killed) yields the
records before it; a checksum or header that is wrong raises TxLogError.
"""
import glob
import json
import os
import re
import struct
import zlib

BLOCK = 32768
RECORD_HEADER = 7
FILE_HEADER = struct.pack('<4sHB', b':W&B', 0xBEE1, 0)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class TxLogError(Exception):
    pass


def records(path):
    """The data of every whole record of the log at path, in order."""
    with open(path, 'rb') as f:
        buf = f.read()
    if buf[:len(FILE_HEADER)] != FILE_HEADER:
        raise TxLogError(f'{path}: not a W&B transaction log (header {buf[:7]!r})')
    pos, pending = len(FILE_HEADER), None
    while True:
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < RECORD_HEADER:  # a trailer of zeros fills the block
            pos += left_in_block
            continue
        if pos + RECORD_HEADER > len(buf):
            return
        crc, length, kind = struct.unpack_from('<IHB', buf, pos)
        if crc == 0 and length == 0 and kind == 0:  # zero padding at the end of a log being written
            return
        start, end = pos + RECORD_HEADER, pos + RECORD_HEADER + length
        if end > len(buf):
            return  # cut short: the run is still writing, or was killed
        data = buf[start:end]
        if kind not in (FULL, FIRST, MIDDLE, LAST):
            raise TxLogError(f'{path}: offset {pos}: record type {kind}')
        if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise TxLogError(f'{path}: offset {pos}: checksum mismatch')
        pos = end
        if kind == FULL:
            yield data
        elif kind == FIRST:
            pending = data
        elif pending is None:
            raise TxLogError(f'{path}: offset {pos}: a continuation without its first part')
        elif kind == MIDDLE:
            pending += data
        else:
            yield pending + data
            pending = None


def history(path):
    """Every history row of the log: {key: value} (JSON-decoded values; nested keys joined with '/')."""
    from wandb.proto import wandb_internal_pb2

    for data in records(path):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(data)
        if rec.WhichOneof('record_type') != 'history':
            continue
        row = {}
        for item in rec.history.item:
            key = item.key or '/'.join(item.nested_key)
            row[key] = json.loads(item.value_json)
        yield row


def run_logs(wandb_dir, run_id):
    """The transaction logs of run run_id under wandb_dir/wandb, oldest first
    (a resumed run has one per process that logged to it). A process that
    starts in the same second as an earlier one finds its directory name
    (MODE-run-YYYYMMDD_HHMMSS-ID) taken, and wandb appends -1, -2, ...: those
    sort after the name without the suffix, in the suffix's order."""
    name = re.compile(r'(?:offline-)?run-(\d{8}_\d{6})-' + re.escape(run_id) + r'(?:-(\d+))?')
    found = []
    for d in glob.glob(os.path.join(wandb_dir, 'wandb', f'*run-*-{run_id}*')):
        m = name.fullmatch(os.path.basename(d))
        log = os.path.join(d, f'run-{run_id}.wandb')
        if m and os.path.isfile(log):
            found.append(((m.group(1), int(m.group(2) or 0)), log))
    return [log for _, log in sorted(found)]
