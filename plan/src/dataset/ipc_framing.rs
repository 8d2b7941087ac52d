//! The framing of an Arrow IPC file, checked against the file's size before arrow-ipc reads
//! it. arrow-ipc allocates each length a message claims (its metadata, its body) and reads
//! only then, so a claim past the end of the file cost its size in memory (a 72-byte file
//! claiming a 2 GiB message took 2.1 GB), a negative body length aborted the process, and a
//! buffer outside its body panicked. Here every claim must fit in the bytes the file has.

use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;

/// The word before a message's metadata length since Arrow 0.15 (older streams omit it).
const CONTINUATION: [u8; 4] = [0xff; 4];
/// The file form's leading magic and padding (`ARROW1\0\0`).
const FILE_HEAD_BYTES: u64 = 8;
/// The file form's trailer: the footer's length (i32, little-endian), then `ARROW1`.
const FILE_TAIL_BYTES: u64 = 10;

/// The bytes of a file-form file that hold its message stream: from after the leading magic
/// to the footer, whose claimed length must fit in the file.
pub(super) fn file_form_region<F: Read + Seek>(
    file: &mut F,
    file_bytes: u64,
) -> Result<Range<u64>, String> {
    let room = file_bytes.checked_sub(FILE_HEAD_BYTES + FILE_TAIL_BYTES).ok_or_else(|| {
        format!("it opens with ARROW1 but is only {file_bytes} bytes, too short for the file form")
    })?;
    let mut tail = [0u8; FILE_TAIL_BYTES as usize];
    file.seek(SeekFrom::Start(file_bytes - FILE_TAIL_BYTES))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| format!("cannot read its footer: {e}"))?;
    if &tail[4..] != b"ARROW1" {
        return Err("it opens with ARROW1 but does not end with it (the file is cut short)".into());
    }
    let footer_bytes = i32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let end = match u64::try_from(footer_bytes) {
        Ok(n) if n <= room => file_bytes - FILE_TAIL_BYTES - n,
        _ => {
            return Err(format!(
                "its footer claims {footer_bytes} bytes, but the file ({file_bytes} bytes) has \
                 room for {room}"
            ))
        }
    };
    let start = past_padding(file, FILE_HEAD_BYTES..end)
        .map_err(|e| format!("cannot read its first message: {e}"))?;
    Ok(start..end)
}

/// Where the first message starts after the magic: writers pad the magic to their
/// alignment (8 bytes in the format's text, 64 by arrow-rs's default) with zeros, and a
/// message's first 8 bytes are never all zero (its length, or the continuation word).
fn past_padding<F: Read + Seek>(file: &mut F, region: Range<u64>) -> std::io::Result<u64> {
    file.seek(SeekFrom::Start(region.start))?;
    let mut at = region.start;
    let mut word = [0u8; 8];
    while at + 8 <= region.end {
        file.read_exact(&mut word)?;
        if word != [0; 8] {
            break;
        }
        at += 8;
    }
    Ok(at)
}

/// Walks the messages in `region` (metadata length, metadata, body, up to the end-of-stream
/// marker or the region's end) and checks that each one's metadata and body lie inside the
/// region and that every buffer of a record or dictionary batch lies inside its body. Reads
/// only the metadata; a body is skipped.
pub(super) fn check_messages<F: Read + Seek>(
    file: &mut F,
    region: Range<u64>,
) -> Result<(), String> {
    let mut at = region.start;
    let mut index = 0usize;
    while at < region.end {
        let left = region.end - at;
        let io = |e: std::io::Error| format!("cannot read message {index} at byte {at}: {e}");
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        let Some((prefix_bytes, meta_claim)) = read_prefix(file, left).map_err(io)? else {
            return Ok(());
        };
        let claim = |what: &str, bytes: i64, after: u64| {
            format!(
                "message {index} (at byte {at}) claims {bytes} bytes of {what}, but only {} \
                 bytes follow in the file",
                left.saturating_sub(after)
            )
        };
        if meta_claim == 0 {
            return Ok(());
        }
        let meta_bytes = u64::try_from(meta_claim)
            .ok()
            .filter(|&n| prefix_bytes + n <= left)
            .ok_or_else(|| claim("metadata", meta_claim.into(), prefix_bytes))?;
        let mut meta = vec![0u8; meta_bytes as usize];
        file.read_exact(&mut meta).map_err(io)?;
        let message = arrow_ipc::root_as_message(&meta)
            .map_err(|e| format!("message {index} (at byte {at}): bad metadata: {e}"))?;
        let before_body = prefix_bytes + meta_bytes;
        let body_bytes = u64::try_from(message.bodyLength())
            .ok()
            .filter(|&n| n <= left - before_body)
            .ok_or_else(|| claim("body", message.bodyLength(), before_body))?;
        check_buffers(&message, body_bytes)
            .map_err(|what| format!("message {index} (at byte {at}): {what}"))?;
        at += before_body + body_bytes;
        index += 1;
    }
    Ok(())
}

/// A message's prefix: its byte count (4, or 8 with the continuation word) and the metadata
/// length it claims; `None` when fewer than 4 bytes are left (the reader ends there too).
fn read_prefix(file: &mut impl Read, left: u64) -> std::io::Result<Option<(u64, i32)>> {
    if left < 4 {
        return Ok(None);
    }
    let mut word = [0u8; 4];
    file.read_exact(&mut word)?;
    if word != CONTINUATION {
        return Ok(Some((4, i32::from_le_bytes(word))));
    }
    file.read_exact(&mut word)?;
    Ok(Some((8, i32::from_le_bytes(word))))
}

/// Every buffer (offset, length) of a record or dictionary batch must lie inside its body.
fn check_buffers(message: &arrow_ipc::Message<'_>, body_bytes: u64) -> Result<(), String> {
    let batch = message
        .header_as_record_batch()
        .or_else(|| message.header_as_dictionary_batch().and_then(|d| d.data()));
    let Some(buffers) = batch.and_then(|b| b.buffers()) else { return Ok(()) };
    for (i, buffer) in buffers.iter().enumerate() {
        let (offset, length) = (buffer.offset(), buffer.length());
        let end = u64::try_from(offset)
            .ok()
            .zip(u64::try_from(length).ok())
            .and_then(|(o, l)| o.checked_add(l));
        if end.is_none_or(|end| end > body_bytes) {
            return Err(format!(
                "buffer {i} claims bytes {offset}..+{length}, outside its {body_bytes}-byte body"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, RecordBatch, StringArray};

    /// A stream of one record batch of three strings: schema, batch, end marker.
    fn stream_bytes() -> Vec<u8> {
        let column = Arc::new(StringArray::from(vec!["a", "bb", "ccc"])) as ArrayRef;
        let batch = RecordBatch::try_from_iter([("prompt", column)]).unwrap();
        let mut out = Vec::new();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        out
    }

    fn check(bytes: &[u8]) -> Result<(), String> {
        check_messages(&mut Cursor::new(bytes), 0..bytes.len() as u64)
    }

    /// The offset of message `n`'s metadata and its length, walking the prefixes.
    fn metadata_of(bytes: &[u8], n: usize) -> Range<usize> {
        let mut at = 0;
        for i in 0.. {
            let len = i32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
            let meta = at + 8..at + 8 + len;
            if i == n {
                return meta;
            }
            let body = arrow_ipc::root_as_message(&bytes[meta.clone()]).unwrap().bodyLength();
            at = meta.end + body as usize;
        }
        unreachable!()
    }

    /// `bytes` with message `n`'s body length set to `claim` (found by its value in the
    /// metadata, and checked by decoding it again).
    fn with_body_length(mut bytes: Vec<u8>, n: usize, claim: i64) -> Vec<u8> {
        let meta = metadata_of(&bytes, n);
        let old = arrow_ipc::root_as_message(&bytes[meta.clone()]).unwrap().bodyLength();
        let at = bytes[meta.clone()]
            .windows(8)
            .rposition(|w| w == old.to_le_bytes())
            .expect("the body length in the metadata");
        bytes[meta.start + at..meta.start + at + 8].copy_from_slice(&claim.to_le_bytes());
        let patched = arrow_ipc::root_as_message(&bytes[meta]).unwrap().bodyLength();
        assert_eq!(patched, claim, "patched the body length, not another field");
        bytes
    }

    #[test]
    fn a_well_formed_stream_passes() {
        let bytes = stream_bytes();
        check(&bytes).unwrap();
        // Without the end marker too (the reader stops at the end of the bytes).
        check(&bytes[..bytes.len() - 8]).unwrap();
    }

    #[test]
    fn a_metadata_length_past_the_end_of_the_file_is_refused_before_reading_it() {
        let mut bytes = CONTINUATION.to_vec();
        bytes.extend_from_slice(&0x7fff_fff0_i32.to_le_bytes());
        bytes.resize(72, 0);
        let err = check(&bytes).unwrap_err();
        assert!(err.contains("message 0 (at byte 0) claims 2147483632 bytes of metadata"), "{err}");
        assert!(err.contains("only 64 bytes follow"), "{err}");
        let mut negative = CONTINUATION.to_vec();
        negative.extend_from_slice(&(-8_i32).to_le_bytes());
        negative.resize(72, 0);
        assert!(check(&negative).unwrap_err().contains("claims -8 bytes of metadata"));
    }

    #[test]
    fn a_body_length_past_the_end_or_negative_is_refused() {
        for claim in [1_i64 << 31, -64, i64::MAX] {
            let bytes = with_body_length(stream_bytes(), 1, claim);
            let err = check(&bytes).unwrap_err();
            assert!(err.contains("message 1 (at byte "), "{claim}: {err}");
            assert!(err.contains(&format!("claims {claim} bytes of body")), "{claim}: {err}");
        }
    }

    #[test]
    fn a_buffer_outside_its_body_is_refused() {
        let bytes = stream_bytes();
        let meta = metadata_of(&bytes, 1);
        let message = arrow_ipc::root_as_message(&bytes[meta]).unwrap();
        let buffers = message.header_as_record_batch().unwrap().buffers().unwrap();
        let last_end = buffers.iter().map(|b| b.offset() + b.length()).max().unwrap();
        // A body claim one byte short of the last buffer's end leaves that buffer outside it.
        let bytes = with_body_length(bytes, 1, last_end - 1);
        let err = check(&bytes).unwrap_err();
        assert!(err.contains("message 1") && err.contains("outside its"), "{err}");
    }

    #[test]
    fn a_file_form_footer_longer_than_the_file_is_refused() {
        let mut bytes = b"ARROW1\0\0".to_vec();
        bytes.extend_from_slice(&stream_bytes());
        bytes.extend_from_slice(&0x7fff_fff0_i32.to_le_bytes());
        bytes.extend_from_slice(b"ARROW1");
        let len = bytes.len() as u64;
        let err = file_form_region(&mut Cursor::new(&bytes), len).unwrap_err();
        assert!(err.contains("its footer claims 2147483632 bytes"), "{err}");
        let cut = &bytes[..bytes.len() - 3];
        let err = file_form_region(&mut Cursor::new(cut), cut.len() as u64).unwrap_err();
        assert!(err.contains("does not end with it"), "{err}");
        // A footer that fits leaves the stream before it, past the magic's padding.
        let n = bytes.len();
        bytes[n - 10..n - 6].copy_from_slice(&0_i32.to_le_bytes());
        assert_eq!(file_form_region(&mut Cursor::new(&bytes), len).unwrap(), 8..len - 10);
        bytes.splice(8..8, [0u8; 56]);
        let len = bytes.len() as u64;
        assert_eq!(file_form_region(&mut Cursor::new(&bytes), len).unwrap(), 64..len - 10);
    }
}
