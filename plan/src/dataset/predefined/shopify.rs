//! The reference's Shopify product catalogue datasets (`shopify_product_catalogue` and
//! `shopify_product_catalogue_8k`, preset `q3vl`): where their processed parquet lies, and the
//! preset's multimodal rows, a system prompt and a user message of a text part and an image
//! part, exactly as the reference's `ShopifyMultimodalFormatter` writes them.

use loadgen_worker::request::ContentPart;
use serde_json::{Map, Value};

use super::cell::cell_text;
use crate::row::Row;

/// The two ids and their loaders' `DEFAULT_SPLITS`.
pub(super) const SHOPIFY_IDS: [(&str, &[&str]); 2] = [
    ("shopify_product_catalogue", &["train", "test"]),
    ("shopify_product_catalogue_8k", &["train"]),
];

/// Where the reference's loader takes each id from (the error for a missing cache says it).
pub(super) fn hf_repo(id: &str) -> &'static str {
    if id == "shopify_product_catalogue_8k" {
        "nvidia/Shopify-product-catalogue-8k"
    } else {
        "Shopify/product-catalogue"
    }
}

/// The split key of `generate` (`"+".join(split)`): the folder and file name of its parquet,
/// `<id>/<key>/<id>_<key>.parquet` under `datasets_dir`.
pub(super) fn split_key(splits: &[String]) -> String {
    splits.join("+")
}

/// The system prompt before the schema: `ProductMetadata`'s JSON schema follows it, as
/// pydantic 2.12 prints it (`json.dumps(model_json_schema(), indent=2)`, the class docstring
/// as its description), then the closing fence.
const SYSTEM_BEFORE_SCHEMA: &str = r#"Please analyze the product from the user prompt
and provide the following fields in a valid JSON object:
- category
- brand
- is_secondhand

You must choose only one, which is the most appropriate, correct, and specific
category out of the list of possible product categories.

The description of the product sometimes contains various types of source code
(e.g., JavaScript, CSS, HTML, etc.), where useful product information is embedded
somewhere inside the source code. For this task, you should extract the useful
product information from the source code and leverage it, and discard the
programmatic parts of the source code.

Your response should only contain a valid JSON object and nothing more, e.g.,
you should not fence the JSON object inside a ```json code block.
The JSON object should match the following JSON schema:
```json
"#;

const PRODUCT_METADATA_SCHEMA: &str = r#"{
  "additionalProperties": false,
  "description": "JSON format for expected VLM responses (matches MLCommons Q3VL schema).\n\nReference: https://github.com/mlcommons/inference/blob/master/multimodal/qwen3-vl/src/mlperf_inf_mm_q3vl/schema.py",
  "properties": {
    "category": {
      "title": "Category",
      "type": "string"
    },
    "brand": {
      "title": "Brand",
      "type": "string"
    },
    "is_secondhand": {
      "title": "Is Secondhand",
      "type": "boolean"
    }
  },
  "required": [
    "category",
    "brand",
    "is_secondhand"
  ],
  "title": "ProductMetadata",
  "type": "object"
}"#;

/// The q3vl preset's row of one processed record: the system prompt, and a user message of
/// the product's text and, when the record has image data, its image as a data URL.
pub(super) fn q3vl_row(rec: &Map<String, Value>) -> Row {
    // `row.get(key, default)`: a missing column is its default, a null cell Python's None.
    let text = |key: &str, default: &str| rec.get(key).map_or(default.to_string(), cell_text);
    let system = format!("{SYSTEM_BEFORE_SCHEMA}{PRODUCT_METADATA_SCHEMA}\n```\n");
    let user = format!(
        "The title of the product is the following:\n```text\n{}\n```\n\nThe description of \
         the product is the following:\n```text\n{}\n```\n\nThe following are the possible \
         product categories:\n```json\n{}\n```\n",
        text("product_title", ""),
        text("product_description", ""),
        text("potential_product_categories", "[]"),
    );
    let mut parts = vec![ContentPart::Text(user)];
    // `if image_base64:` — an empty string or a null cell sends no image part.
    if let Some(Value::String(data)) = rec.get("product_image_base64") {
        if !data.is_empty() {
            let format = text("product_image_format", "JPEG");
            parts.push(ContentPart::ImageUrl(format!("data:image/{format};base64,{data}")));
        }
    }
    Row { system: Some(system), content_parts: Some(parts), ..Row::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect()
    }

    /// The reference's formatter on the same record (its `process_row`, run once under
    /// pydantic 2.12.5): a text part, then the image as a data URL.
    #[test]
    fn the_q3vl_row_is_the_references_system_prompt_and_parts() {
        let row = q3vl_row(&record(&[
            ("product_title", "Polo \"Classic\" é"),
            ("product_description", "line1\nline2"),
            ("product_image_base64", "iVBORw0KGgo="),
            ("product_image_format", "PNG"),
            ("potential_product_categories", "[\"Apparel > Shirts\", \"Home > Lamps\"]"),
            ("ground_truth_category", "Apparel > Shirts"),
        ]));
        let text = "The title of the product is the following:\n```text\nPolo \"Classic\" é\n```\n\nThe description of the product is the following:\n```text\nline1\nline2\n```\n\nThe following are the possible product categories:\n```json\n[\"Apparel > Shirts\", \"Home > Lamps\"]\n```\n";
        let url = "data:image/PNG;base64,iVBORw0KGgo=";
        let parts = vec![ContentPart::Text(text.into()), ContentPart::ImageUrl(url.into())];
        assert_eq!(row.content_parts, Some(parts));
        assert_eq!(row.prompt, None, "the parts are the prompt");
        let system = row.system.unwrap();
        assert_eq!(system.chars().count(), 1462, "the reference's system prompt's length");
        assert!(system.starts_with("Please analyze the product from the user prompt\nand "));
        assert!(
            system.ends_with("  \"title\": \"ProductMetadata\",\n  \"type\": \"object\"\n}\n```\n")
        );
        let schema: Value = serde_json::from_str(PRODUCT_METADATA_SCHEMA).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["category", "brand", "is_secondhand"]));
        assert_eq!(schema["properties"]["is_secondhand"]["title"], "Is Secondhand");
    }

    #[test]
    fn a_record_without_image_data_sends_the_text_part_alone() {
        let row = q3vl_row(&record(&[("product_title", "T"), ("product_image_base64", "")]));
        let parts = row.content_parts.unwrap();
        assert_eq!(parts.len(), 1, "{parts:?}");
        let ContentPart::Text(text) = &parts[0] else { panic!("{parts:?}") };
        assert!(text.contains("```text\nT\n```"), "{text}");
        assert!(text.contains("```text\n\n```"), "a missing description is empty: {text}");
        assert!(text.ends_with("```json\n[]\n```\n"), "missing categories are []: {text}");
    }
}
