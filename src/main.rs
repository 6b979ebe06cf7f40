//! The `ipub` command-line driver.

fn main() {
    println!("ipub");
}
